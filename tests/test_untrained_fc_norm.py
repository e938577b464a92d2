"""W604 and `inspect`'s fc_norm line: ones in fc_norm are an untrained init, whatever produced them.

Each case is a fixture mutant whose only difference is the fc_norm values or the record beside
them (eagle-convert's provenance, the model card); the verdict's wording and impact follow the record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from click.testing import CliRunner

from eagle_convert.check.checks import static_checks
from eagle_convert.cli.app import main
from eagle_convert.draft import fc_norm_state, open_checkpoint
from eagle_convert.validate.run import validate_checkpoint
from fixtures.drafts import FIXTURE_MATRIX, build_draft
from fixtures.edits import edit_config, edit_draft, set_config, upgrade_draft

FC_NORMS = [f"fc_norm.{i}.weight" for i in range(3)]
FIX_TAIL = "measures how much acceptance it costs."


def _fill(value: float, names: list[str] = FC_NORMS):
    def edit(s: dict[str, torch.Tensor]) -> None:
        for n in names:
            s[n] = torch.full_like(s[n], value)

    return edit


def _w604(draft: Path, **kw: Any):
    report = validate_checkpoint(draft, **kw)
    hits = [f for f in report.findings if f.code == "W604"]
    return report, hits


def _identity_upgrade(tmp_path: Path) -> tuple[Path, Path]:
    src = build_draft(tmp_path / "e3", FIXTURE_MATRIX["specforge-eagle3"])
    return src, upgrade_draft(src, tmp_path / "e31")


def test_identity_upgrade_is_hygiene_and_names_its_source(tmp_path: Path) -> None:
    src, out = _identity_upgrade(tmp_path)
    report, [hit] = _w604(out)
    assert hit.level == "warning" and hit.impact == "hygiene"
    assert hit.tensor == "fc_norm.0.weight .. fc_norm.2.weight"
    assert hit.message == (
        "every fc_norm weight is exactly 1.0: the identity init of an upgrade (provenance: upgrade EAGLE-3 -> "
        "EAGLE-3.1, fc_norm init ones), as expected right after it; the draft computes what the upgrade made it "
        "compute, but acceptance is expected below the EAGLE-3 source's until fc_norm is calibrated or fine-tuned"
    )
    assert hit.fix == (
        f"Fit the values: `eagle-convert upgrade {src} --init calibrated --target TARGET --out OUT` or "
        f"`eagle-convert finetune {out} --target TARGET --out FINETUNED`; "
        f"`eagle-convert smoke {src} {out} --target TARGET` {FIX_TAIL}"
    )
    # The default check policy (examples/eagle-check.toml's [static]) does not fail on it: served as written.
    assert all(r.passed for r in static_checks(report, ["W307"]))


def test_given_target_goes_into_the_fix(tmp_path: Path) -> None:
    _src, out = _identity_upgrade(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "vocab_size": 256}
    (target / "config.json").write_text(json.dumps(cfg | {"num_hidden_layers": 8}))
    _report, [hit] = _w604(out, target=target)
    assert f"--target {target}" in hit.fix and "TARGET" not in hit.fix


def test_trained_values_get_no_finding(tmp_path: Path) -> None:
    draft = build_draft(tmp_path / "d", FIXTURE_MATRIX["vllm-eagle31"])  # 1 + noise: trained-looking
    assert _w604(draft)[1] == []
    state = fc_norm_state(open_checkpoint(draft))
    assert state is not None and state.values == "trained" and state.identity == ()


def test_ones_without_any_record(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle31", tensors=_fill(1.0))
    _report, [hit] = _w604(draft)
    assert hit.impact == "hygiene"
    assert hit.message == (
        "every fc_norm weight is exactly 1.0 (the identity init `upgrade` and converters write) and no record of "
        "a calibration or fine-tune (no eagle-convert provenance says so, nor the model card): acceptance is "
        "expected below a trained EAGLE-3.1 draft's until fc_norm is calibrated or fine-tuned"
    )


def test_partial_ones_are_counted(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle31", tensors=_fill(1.0, FC_NORMS[1:2]))
    _report, [hit] = _w604(draft)
    assert hit.tensor == "fc_norm.1.weight" and hit.message.startswith("1 of 3 fc_norm weights are exactly 1.0 ")


def test_provenance_that_claims_fitted_values_makes_ones_serving_changing(tmp_path: Path) -> None:
    _src, out = _identity_upgrade(tmp_path)
    prov = json.loads((out / "config.json").read_text())["_eagle_convert"]
    claimed = edit_config(out, _eagle_convert={**prov, "operation": "finetune (TTT)"})
    report, [hit] = _w604(claimed)
    assert hit.impact == "computes-differently"
    assert hit.message == (
        "every fc_norm weight is exactly 1.0 although the newest record says fine-tuned (provenance: finetune "
        "(TTT)): the fitted values were replaced since (a re-export that dropped the fc_norm tensors and filled "
        "ones?); vLLM serves identity norms, not what was trained"
    )
    assert not static_checks(report, ["W307"])[1].passed


def test_calibrated_upgrade_values_pass_and_read_as_calibrated(tmp_path: Path) -> None:
    prov = {"tool": "eagle-convert", "operation": "upgrade EAGLE-3 -> EAGLE-3.1", "added_init": "calibrated"}
    draft = edit_draft(tmp_path / "d", "vllm-eagle31", tensors=_fill(0.37), config=set_config(_eagle_convert=prov))
    assert _w604(draft)[1] == []
    state = fc_norm_state(open_checkpoint(draft))
    assert state is not None and state.values == "calibrated" and state.claim == "calibrated"
    # the same provenance over ones: the calibrated values were lost
    ones = edit_draft(tmp_path / "o", "vllm-eagle31", tensors=_fill(1.0), config=set_config(_eagle_convert=prov))
    assert _w604(ones)[1][0].impact == "computes-differently"


def test_card_claim_is_named_but_stays_hygiene(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle31", tensors=_fill(1.0))
    (draft / "README.md").write_text("# My draft\n\nFine-tuned on ShareGPT for Llama-3.1-8B.\n")
    _report, [hit] = _w604(draft)
    assert hit.impact == "hygiene"
    assert hit.message.endswith(
        "although the model card claims training (README.md says 'Fine-tuned'): if fc_norm was trained, its "
        "values were lost in export; as it is, acceptance is expected below a trained EAGLE-3.1 draft's"
    )


def test_fc_norm_flag_off_is_not_w604(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "d", "vllm-eagle31", tensors=_fill(1.0), config=set_config(fc_norm=False))
    report, hits = _w604(draft)
    assert hits == [] and "E104" in report.codes()


def test_inspect_shows_identity_and_json(tmp_path: Path) -> None:
    _src, out = _identity_upgrade(tmp_path)
    result = CliRunner().invoke(main, ["inspect", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("fc_norm"))
    assert re.sub(r"\s+", " ", line).strip() == (
        "fc_norm identity (untrained) [provenance: upgrade EAGLE-3 -> EAGLE-3.1, fc_norm init ones]"
    )
    data = json.loads(CliRunner().invoke(main, ["inspect", str(out), "--json"]).output)
    assert data["fc_norm"] == {
        "values": "identity",
        "tensors": FC_NORMS,
        "identity": FC_NORMS,
        "claim": "identity",
        "claim_source": "provenance: upgrade EAGLE-3 -> EAGLE-3.1, fc_norm init ones",
    }


def test_inspect_of_an_eagle3_draft_has_no_fc_norm_line(tmp_path: Path) -> None:
    draft = build_draft(tmp_path / "d", FIXTURE_MATRIX["vllm-eagle3"])
    result = CliRunner().invoke(main, ["inspect", str(draft)], terminal_width=200)
    assert result.exit_code == 0 and not any(x.startswith("fc_norm") for x in result.output.splitlines())
