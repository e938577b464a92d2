"""The serve command per engine (engines/serve.py): every flag and field it emits is one the engine's own
parser declares, with that type, as engines/serve_args.py cites it (file and line for SGLang 0.5.23's
wheel, class and field for TensorRT-LLM's llm_args.py); vLLM's keys are SpeculativeConfig's of every
known release (vllm_model/speculative.py). Shown by validate (text and --json) and the model card."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.draft import model_card, retarget_card
from eagle_convert.engines import Draft, serve_command
from eagle_convert.engines.serve_args import SGLANG_FLAGS, TRTLLM_FIELDS, TRTLLM_SERVE_FLAGS, sglang_flag
from eagle_convert.vllm_model import KNOWN_RELEASES
from eagle_convert.vllm_model.releases import release
from eagle_convert.vllm_model.speculative import KEYS, accepted
from fixtures.edits import edit_draft
from tests.jsonschemas import check_schema

CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "eagle_aux_hidden_state_layer_ids": [2, 4, 5]}
WINDOWED = {**CONFIG, "sliding_window": 2048, "layer_types": ["sliding_attention"]}


def _draft(config: dict | None = None, **kw) -> Draft:
    return Draft(config if config is not None else CONFIG, "org/draft", "org/target", **kw)


def test_sglang_table_follows_the_parsers_naming_rule() -> None:
    """Each flag is `--` + its cited field name with dashes (arg_utils.py l. 288 _field_to_cli_name), and
    each cite names a file and line of the wheel and the declared type."""
    for name, arg in SGLANG_FLAGS.items():
        m = re.fullmatch(r"(srt/arg_groups/fields/\w+\.py):(\d+) (\w+): A\[(Optional\[)?(\w+)\]?.*", arg.cite)
        assert m, arg.cite
        assert name == "--" + m.group(3).replace("_", "-")
        assert arg.type == m.group(5)
    for name, field in TRTLLM_FIELDS.items():
        assert f".{'speculative_model' if name == 'speculative_model_dir' else name}:" in field.cite


@pytest.mark.parametrize(
    ("config", "kw"),
    [
        (CONFIG, {}),
        (WINDOWED, {"k": 5}),
        ({**WINDOWED, "kv_lora_rank": 16}, {}),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, {"n": 32}),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, {}),
    ],
)
def test_every_emitted_flag_and_field_is_declared_with_its_type(config: dict, kw: dict) -> None:
    draft = _draft(config, **kw)
    sg = serve_command(draft, "sglang")
    assert sg.argv[:3] == ("python", "-m", "sglang.launch_server")
    for name, value in sg.flags:
        arg = SGLANG_FLAGS[name]
        assert arg.accepts(str(value)), (name, value, arg.cite)
    # the command line holds exactly these flags, each followed by its value
    assert list(sg.argv[3:]) == [str(t) for pair in sg.flags for t in pair]
    trt = serve_command(draft, "trtllm")
    for name, value in trt.fields:
        assert TRTLLM_FIELDS[name].accepts(value), (name, value)
    for name, value in trt.flags:
        assert TRTLLM_SERVE_FLAGS[name].accepts(value)
    parsed = yaml.safe_load(trt.config_text or "")
    assert parsed == {"speculative_config": {k: v for k, v in trt.fields}}
    vl = serve_command(draft, "vllm")
    spec = json.loads(vl.argv[-1])
    for version in KNOWN_RELEASES:  # every release's SpeculativeConfig has these keys
        assert set(spec) <= set(accepted(KEYS, release(version))), version
    assert spec == {"method": "eagle3", "model": "org/draft", "num_speculative_tokens": draft.k}


def test_sglang_window_flag_where_its_class_honours_it() -> None:
    plain = serve_command(_draft(WINDOWED), "sglang")
    assert plain.command == (
        "python -m sglang.launch_server --model-path org/target --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path org/draft --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4 --speculative-draft-window-size 2048"
    )
    mla = serve_command(_draft({**WINDOWED, "kv_lora_rank": 16}), "sglang")
    assert "--speculative-draft-window-size" not in mla.command
    assert "its MLA draft class ignores --speculative-draft-window-size: the window of 2048 is never applied" in (
        mla.notes
    )
    assert sglang_flag("--speculative-draft-model") is SGLANG_FLAGS["--speculative-draft-model-path"]


def test_sglang_note_when_the_draft_config_taps_other_layers() -> None:
    top_only = serve_command(_draft(), "sglang")  # SGLang reads only eagle_config: its default layers
    assert top_only.notes == (
        "SGLang 0.5.23 reads the aux ids from the draft's eagle_config.eagle_aux_hidden_state_layer_ids, not "
        "from this command: it taps the default layers, the draft was trained on A(2, 4, 5); write "
        "eagle_config.eagle_aux_hidden_state_layer_ids: [1, 3, 4] (`eagle-convert upgrade --for sglang` writes it)",
    )
    fixed = {**CONFIG, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}}
    assert serve_command(_draft(fixed), "sglang").notes == ()


def test_trtllm_capture_layers_in_its_output_of_layer_convention() -> None:
    cmd = serve_command(_draft(), "trtllm")
    assert cmd.command == "trtllm-serve org/target --extra_llm_api_options speculative.yaml"
    assert cmd.config_text == (
        "speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 3\n  speculative_model_dir: org/draft\n"
        "  eagle3_layers_to_capture: [1, 3, 4]\n  eagle3_model_arch: llama3\n"
    )
    unsorted = serve_command(_draft({**CONFIG, "eagle_aux_hidden_state_layer_ids": [5, 2, 4]}), "trtllm")
    assert dict(unsorted.fields)["eagle3_layers_to_capture"] == [1, 3, 4]
    assert any("sorts eagle3_layers_to_capture" in n for n in unsorted.notes)
    default = serve_command(_draft({"architectures": ["LlamaForCausalLMEagle3"]}), "trtllm")
    assert "eagle3_layers_to_capture" not in dict(default.fields)  # TRT-LLM's default taps the same layers
    with_n = serve_command(_draft({"architectures": ["LlamaForCausalLMEagle3"]}, n=32), "trtllm")
    assert dict(with_n.fields)["eagle3_layers_to_capture"] == [1, 15, 28]  # vLLM's (2, 16, 29) - 1
    spaced = Draft(CONFIG, "my drafts/d:1", None)
    assert "speculative_model_dir: my drafts/d:1" not in (serve_command(spaced, "trtllm").config_text or "")
    assert (
        yaml.safe_load(serve_command(spaced, "trtllm").config_text or "")["speculative_config"]["speculative_model_dir"]
        == "my drafts/d:1"
    )


def test_validate_shows_the_serve_command_in_text_and_json(tmp_path: Path) -> None:
    d = edit_draft(tmp_path / "d")
    for engine, head in (("sglang", "serve on SGLang 0.5.23:"), ("trtllm", "serve on TensorRT-LLM main@00679c6:")):
        res = CliRunner().invoke(main, ["validate", str(d), "--for", engine, "--json"])
        data = json.loads(res.stdout)
        check_schema(data, "validate-report.schema.json")
        [cmd] = data["serve_commands"]
        assert cmd["engine"] == engine and cmd["flags"] and str(d) in cmd["command"] + (cmd["config_text"] or "")
        text = CliRunner().invoke(main, ["validate", str(d), "--for", engine], terminal_width=400).stdout
        assert head in text
    vllm = json.loads(CliRunner().invoke(main, ["validate", str(d), "--json"]).stdout)
    assert vllm["serve_commands"][0]["command"] == (
        f'vllm serve TARGET --speculative-config \'{{"method": "eagle3", "model": "{d}", "num_speculative_tokens": 3}}\''
    )
    matrix = json.loads(CliRunner().invoke(main, ["validate", str(d), "--for", "all", "--json"]).stdout)
    check_schema(matrix, "validate-matrix.schema.json")
    assert [c["engine"] for c in matrix["serve_commands"]] == ["vllm", "sglang", "trtllm"]


def test_model_card_lists_each_engine_and_push_retargets_them() -> None:
    card = model_card(CONFIG, model_ref="out/d", target="org/target", engines=["vllm", "sglang", "trtllm"])
    assert "## Serve with SGLang" in card and "## Serve with TensorRT-LLM" in card
    assert "--speculative-draft-model-path out/d " in card and "  speculative_model_dir: out/d\n" in card
    moved = retarget_card(card, "org/new-draft")
    assert "--speculative-draft-model-path org/new-draft " in moved
    assert '  speculative_model_dir: "org/new-draft"\n' in moved and "out/d" not in moved
    assert "## Serve with SGLang" not in model_card(CONFIG, model_ref="out/d")  # vLLM only, as before


def test_a_long_command_is_shell_lines_that_fit_and_read_back_as_the_same_argv() -> None:
    """Piped output fits 100 columns: the command breaks between tokens (backslash-newline) and a long
    JSON argument after a comma between items (a newline in single quotes is JSON whitespace); bash
    reads the lines back as the same arguments and the JSON as the same object."""
    import json
    import subprocess

    from eagle_convert.engines import ServeCommand

    config = {"method": "eagle3", "model": "/tmp/" + "d" * 60 + "/eagle31-draft", "num_speculative_tokens": 3}
    argv = ("vllm", "serve", "/models/target", "--speculative-config", json.dumps(config))
    lines = ServeCommand("vllm", "0.32.0", "vLLM", argv).shell_lines(100)
    assert len(lines) > 2 and all(len(line) <= 100 for line in lines)
    script = "import json, sys; print(json.dumps(sys.argv[1:]))"
    shell = "\n".join(lines).replace("vllm serve", f"python3 -c '{script}'", 1)
    got = json.loads(subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True).stdout)
    assert got[:2] == ["/models/target", "--speculative-config"] and json.loads(got[2]) == config
    assert ServeCommand("vllm", "0.32.0", "vLLM", argv[:3]).shell_lines(100) == ["vllm serve /models/target"]
