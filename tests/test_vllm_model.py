"""One model of vLLM: every command reads a draft the way `vllm_model.read_config` says, and its
tables exist once.

The property: for every fixture draft and every config variant the tests can generate (each MTP
model type, each aux-id placement, speculators configs, A != 3), `upgrade` either refuses with one
line or writes a draft that `validate` passes, and describe, validate's context, the reference
drafter and (marked `vllm`) vLLM's own loader agree on its aux ids, aux count and flags.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from eagle_convert.draft.checkpoint import open_checkpoint
from eagle_convert.draft.info import describe
from eagle_convert.errors import UpgradeRefusedError, UsageError
from eagle_convert.upgrade.apply import apply_upgrade
from eagle_convert.upgrade.plan import plan_upgrade
from eagle_convert.validate.rules.context import build_context
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import changes, default_release, releases, rewrites, tables
from eagle_convert.vllm_model.config import read_config
from eagle_convert.vllm_model.features import vllm_available

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "eagle_convert"
TABLES_FILES = (PACKAGE / "vllm_model" / "tables.py", PACKAGE / "vllm_model" / "rewrites.py")
FLAGS = ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual")
ID_KEYS = ("eagle_aux_hidden_state_layer_ids", "eagle_config", "num_aux_hidden_states")

# ----------------------------------------------------------------------------- one table, one place

_TABLES: dict[str, set[str]] = {
    "ARCHITECTURES": set(tables.ARCHITECTURES),
    "DRAFT_CLASSES": set(tables.DRAFT_CLASSES),
    "MTP_MODEL_TYPES": set(rewrites.MTP_MODEL_TYPES) | set(rewrites.MTP_MODEL_TYPES_WITH_NEXTN),
    "MTP_ARCHITECTURES": set(rewrites.MTP_ARCHITECTURES),
    "SPECULATORS_ARCHITECTURES": {a for row in tables.SPECULATORS_ARCHITECTURES.values() for a in row.values()},
    "AUX_ID_LOCATIONS": set(tables.AUX_ID_LOCATIONS),
}
_DEFAULT_IDS = re.compile(r"[\[(]\s*2\s*,\s*[a-z_]\w*\s*//\s*2\s*,\s*[a-z_]\w*\s*-\s*3\s*[\])]")  # code, not prose


def _string_collections(tree: ast.AST):
    """Every list / tuple / set / dict literal's string members (dict: keys and values)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [*(k for k in node.keys if k is not None), *node.values]
        else:
            continue
        yield node.lineno, {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def _json_collections(value, path="$"):
    if isinstance(value, dict):
        yield path, set(value) | {v for v in value.values() if isinstance(v, str)}
        for k, v in value.items():
            yield from _json_collections(v, f"{path}.{k}")
    elif isinstance(value, list):
        yield path, {v for v in value if isinstance(v, str)}
        for i, v in enumerate(value):
            yield from _json_collections(v, f"{path}[{i}]")


# Tables of vLLM's own that share names with one above without being a copy of it, with the reason.
_OTHER_TABLES = {
    ("eagle_convert/engines/sglang.py", "ARCHITECTURES"): (
        "SGLang 0.5.23's own draft registry (models/registry.py): two of its names are also vLLM's"
    ),
    ("eagle_convert/vllm_model/speculative.py", "MTP_MODEL_TYPES"): (
        "SpeculativeMethod (config/speculative.py): the *_mtp method names, not the model types hf_config_override rewrites"
    ),
}


def _second_copies() -> list[str]:
    found = []
    for py in sorted(PACKAGE.rglob("*.py")):
        if py in TABLES_FILES:
            continue
        text = py.read_text()
        rel = py.relative_to(ROOT)
        for lineno, members in _string_collections(ast.parse(text)):
            for name, table in _TABLES.items():
                if len(members & table) >= 2 and (str(rel), name) not in _OTHER_TABLES:
                    found.append(f"{rel}:{lineno} repeats {name}: {sorted(members & table)}")
        for m in _DEFAULT_IDS.finditer(text):
            found.append(f"{rel}: vLLM's default aux ids written again: {m.group(0)!r}")
    for js in sorted((ROOT / "schemas").glob("*.json")):
        for path, members in _json_collections(json.loads(js.read_text())):
            for name, table in _TABLES.items():
                if len(members & table) >= 2:
                    found.append(f"schemas/{js.name} {path} repeats {name}: {sorted(members & table)}")
    return found


def test_no_vllm_table_is_defined_twice() -> None:
    assert _second_copies() == []


def test_the_duplicate_detector_finds_a_copy() -> None:
    """The scan above would fail if a table came back (guards against a detector that finds nothing)."""
    members = {"deepseek_v3", "qwen3_next", "llama"}
    collections = list(_string_collections(ast.parse(f"X = {sorted(members)!r}")))
    assert any(len(m & _TABLES["MTP_MODEL_TYPES"]) >= 2 for _, m in collections)
    assert _DEFAULT_IDS.search("ids = [2, n // 2, n - 3]")


# ------------------------------------------------------------- one rope default, one reading of a target

TARGET_FILE = PACKAGE / "draft" / "target.py"
# Modules that read a *draft's* num_hidden_layers (never a target's: that is draft/target.py's).
DRAFT_LAYER_READERS = {
    "vllm_model/attention.py",  # sliding_windows: the draft config's layers
    "validate/rules/config.py",  # the draft config's required fields
    "validate/rules/context.py",  # symbol L of schemas/tensors.json
    "validate/rules/keys.py",  # a finding's field name
    "draft/card.py",  # the card's "draft layers" row
    "reference/drafter.py",  # DraftConfig
    "vllm/hooks.py",  # the draft config vLLM built, read in its worker
    "served_diff.py",  # the draft config's sizes as vLLM reads them (diff --served)
}
_TARGETISH = re.compile(r"target|tgt|tcfg|verifier", re.I)
_ROPEISH = re.compile(r"rope|theta", re.I)
_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Expr)


def _receiver_of(node: ast.AST, key: str) -> str | None:
    """The expression `key` is read from, when `node` reads it (x.get(key), x[key], getattr(x, key), x.key)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == key:
        return ast.unparse(node.value)
    if isinstance(node, ast.Attribute) and node.attr == key:
        return ast.unparse(node.value)
    if isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value == key for a in node.args):
        if isinstance(node.func, ast.Attribute):
            return ast.unparse(node.func.value)
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args:
            return ast.unparse(node.args[0])
    return None


def _second_readings(rel: str, text: str) -> list[str]:
    """Where module `rel` (path under eagle_convert/) reads a target's config or writes a rope default itself."""
    found: list[str] = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        # the face names text_config(); the tables (rewrites.py: the sub-config vLLM's MTP rule reads) name it
        if rel not in ("draft/target.py", "draft/__init__.py", "vllm_model/tables.py", "vllm_model/rewrites.py"):
            if isinstance(node, ast.Constant) and node.value == "text_config":
                found.append(f"{rel}:{line} reads text_config (use draft.target.Target)")
            if isinstance(node, ast.Constant) and node.value == "num_hidden_layers" and rel not in DRAFT_LAYER_READERS:
                found.append(f"{rel}:{line} reads num_hidden_layers outside the draft readers (a target's: Target)")
            receiver = _receiver_of(node, "num_hidden_layers")
            if receiver is not None and _TARGETISH.search(receiver):
                found.append(f"{rel}:{line} reads a target's num_hidden_layers from {receiver} (use Target.num_layers)")
        if rel != "vllm_model/tables.py" and isinstance(node, _SIMPLE):
            words = [
                w
                for n in ast.walk(node)
                for w in (
                    n.id if isinstance(n, ast.Name) else None,
                    n.attr if isinstance(n, ast.Attribute) else None,
                    n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None,
                )
                if w
            ]
            numbers = [
                n.value
                for n in ast.walk(node)
                if isinstance(n, ast.Constant)
                and isinstance(n.value, (int, float))
                and not isinstance(n.value, bool)
                and abs(n.value) >= 1000
            ]
            if numbers and any(_ROPEISH.search(w) and len(w) < 40 for w in words):
                found.append(f"{rel}:{line} writes a rope default {numbers} (tables.ROPE_THETA_DEFAULTS)")
    return found


def _all_second_readings() -> list[str]:
    return [
        hit
        for py in sorted(PACKAGE.rglob("*.py"))
        for hit in _second_readings(py.relative_to(PACKAGE).as_posix(), py.read_text())
    ]


def test_rope_defaults_and_target_configs_are_read_once() -> None:
    """The reference drafter had its own theta (1e6 for Qwen3) and four modules read text_config."""
    assert _all_second_readings() == []


@pytest.mark.parametrize(
    ("rel", "code"),
    [
        ("reference/drafter.py", 'theta = float(rope.get("rope_theta", cfg.get("rope_theta") or 1_000_000.0))'),
        ("reference/drafter.py", "    rope_theta: float = 10000.0"),
        ("finetune/plan.py", 'tcfg = tcfg.get("text_config", tcfg)'),
        ("upgrade/configgen.py", 'text = config["text_config"] if isinstance(config.get("text_config"), dict) else {}'),
        ("validate/rules/auxids.py", 'value = (ctx.target or {}).get("num_hidden_layers")'),
        ("validate/rules/config.py", 'n = ctx.target["num_hidden_layers"]'),
        ("measure/smoke.py", "n = getattr(target_cfg, 'num_hidden_layers', None)"),
    ],
)
def test_the_second_reading_detector_finds_a_copy(rel: str, code: str) -> None:
    """Each deliberate copy (the ones this repo used to have) is reported (guards against a detector that finds nothing)."""
    src = f"class C:\n{code}\n" if code.startswith(" ") else code
    assert _second_readings(rel, src), code


def test_rope_theta_defaults_are_transformers_defaults() -> None:
    """Every ROPE_THETA_DEFAULTS entry is what the installed transformers gives a config without rope_theta."""
    transformers = pytest.importorskip("transformers")
    for model_type, theta in tables.ROPE_THETA_DEFAULTS.items():
        if model_type not in transformers.CONFIG_MAPPING:  # an older transformers: nothing to compare
            continue
        text = transformers.AutoConfig.for_model(model_type).get_text_config()
        assert text.rope_parameters["rope_theta"] == theta, model_type
    assert transformers.AutoConfig.for_model("qwen3").rope_parameters["rope_theta"] == tables.default_rope_theta(
        "qwen3"
    )
    assert tables.default_rope_theta("no-such-type") == tables.default_rope_theta(None) == tables.DEFAULT_ROPE_THETA


def test_tables_are_consistent() -> None:
    for attention, arch in tables.WRITE_ARCHITECTURE.items():
        assert tables.DRAFT_CLASSES[tables.ARCHITECTURES[arch]].attention == attention
        assert read_config(
            {"architectures": [arch], "model_type": tables.SAFE_MODEL_TYPE[attention]}, default_release()
        ).builds_eagle3
    for kind, row in tables.SPECULATORS_ARCHITECTURES.items():
        assert set(row.values()) <= set(tables.ARCHITECTURES), kind
    assert tables.default_aux_ids(32) == (2, 16, 29)


# ----------------------------------------------------------------------------- config reading


@pytest.mark.parametrize("model_type", sorted(rewrites.MTP_MODEL_TYPES))
def test_every_mtp_model_type_is_rewritten(model_type: str) -> None:
    """Rewritten from its first release on, and not in the release before it."""
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": model_type}
    first = rewrites.MTP_MODEL_TYPES[model_type]
    for version in (first, releases.NEWEST_RELEASE):
        view = read_config(config, releases.release(version))
        assert view.mtp_rewrite == f"model_type {model_type!r}" and not view.builds_eagle3, version
    before = [v for v in releases.KNOWN_RELEASES if changes.version_key(v) < changes.version_key(first)]
    if before:
        assert read_config(config, releases.release(before[-1])).builds_eagle3


@pytest.mark.parametrize(
    "config, rewritten_from",
    [
        ({"model_type": "step5_vl", "architectures": ["LlamaForCausalLMEagle3"]}, "0.33.0"),
        ({"model_type": "llama", "architectures": ["LlamaForCausalLMEagle3", "Step5ForCausalLM"]}, "0.33.0"),
        ({"model_type": "llama", "architectures": ["LlamaForCausalLMEagle3", "BailingMoeV2_5ForCausalLM"]}, "0.25.0"),
        (
            {
                "model_type": "llama",
                "architectures": ["RadioMBartPrefixForCausalLM"],
                "decoder": {"causal_vision_prefix": True},
            },
            "0.33.0",
        ),
        ({"model_type": "longcat_flash_ngram", "architectures": ["LlamaForCausalLMEagle3"]}, "0.26.0"),
    ],
)
def test_rewrites_follow_the_release(config: dict, rewritten_from: str) -> None:
    """0.33's new rewrites (Step5 anywhere in architectures, RadioMBart with causal_vision_prefix) and
    older ones hit from their first release only; longcat_flash_ngram was rewritten 0.26-0.31 only."""
    first = changes.version_key(rewritten_from)
    for version in releases.KNOWN_RELEASES:
        view = read_config(config, releases.release(version))
        expected = changes.version_key(version) >= first
        if config["model_type"] == "longcat_flash_ngram":
            expected = expected and changes.version_key(version) <= changes.version_key("0.31.0")
        assert (view.mtp_rewrite is not None) is expected, version
    radio = {**config, "decoder": {"causal_vision_prefix": False}}
    if "decoder" in config:
        assert read_config(radio, releases.release("0.33.0")).mtp_rewrite is None


def test_conditional_and_architecture_rewrites() -> None:
    assert read_config({"model_type": "nemotron_h", "architectures": ["X"]}, default_release()).mtp_rewrite is None
    assert read_config(
        {"model_type": "nemotron_h", "num_nextn_predict_layers": 1, "architectures": ["X"]}, default_release()
    ).mtp_rewrite
    assert read_config({"model_type": "exaone4_5_text", "architectures": ["X"]}, default_release()).mtp_rewrite
    assert (
        read_config({"architectures": ["Glm4MoeForCausalLM"]}, default_release()).mtp_rewrite
        == "architectures 'Glm4MoeForCausalLM'"
    )
    # speculators configs build from the inner llama/qwen3 config: the outer model_type is not read
    assert (
        read_config(
            {
                "speculators_model_type": "eagle3",
                "model_type": "deepseek_v3",
                "transformer_layer_config": {"model_type": "llama"},
            },
            default_release(),
        ).mtp_rewrite
        is None
    )


def test_both_config_paths() -> None:
    plain = read_config(
        {"architectures": ["LlamaForCausalLM"], "eagle_config": {"layer_ids": [1, 2, 3]}}, default_release()
    )
    assert plain.architecture == "Eagle3LlamaForCausalLM" and plain.flags["norm_before_residual"] is False
    assert (plain.aux_ids_v1, plain.aux_ids_v2, plain.aux_ids_v2_where) == (None, [1, 2, 3], "eagle_config.layer_ids")
    assert plain.runtime_aux_ids(32) == (2, 16, 29) and plain.runtime_aux_ids(32, runner="v2") == (1, 2, 3)
    spec = read_config(
        {
            "speculators_model_type": "eagle3",
            "fc_norm": True,
            "transformer_layer_config": {"model_type": "qwen3", "num_aux_hidden_states": 4},
        },
        default_release(),
    )
    assert spec.draft_class is not None and spec.draft_class.attention == "qwen3"
    assert spec.flags["norm_before_residual"] is True and spec.flags["fc_norm"] and spec.aux_count == 4
    peagle = read_config(
        {"speculators_model_type": "peagle", "fc_norm": True, "transformer_layer_config": {}}, default_release()
    )
    assert peagle.architecture == "PeagleLlamaForCausalLM" and not peagle.flags["fc_norm"]  # update_peagle drops it
    llama_ids = read_config(
        {"architectures": ["LlamaForCausalLMEagle3"], "eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]},
        default_release(),
    )
    assert llama_ids.aux_count == 3  # llama_eagle3 never counts the top-level ids
    qwen_ids = read_config(
        {"architectures": ["Eagle3Qwen3ForCausalLM"], "eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]},
        default_release(),
    )
    assert qwen_ids.aux_count == 4  # qwen3_eagle3 does


# ----------------------------------------------------------------------------- the upgrade property


def _variants(config: dict, ids: list[int]) -> dict[str, dict]:
    """Config variants of one draft: each aux-id placement, plus an MTP model_type where plain."""

    def with_ids(place: str | None) -> dict:
        cfg = copy.deepcopy(config)
        if "speculators_model_type" in cfg:
            inner = cfg.get("transformer_layer_config") or {}
            inner.pop("eagle_aux_hidden_state_layer_ids", None)
            cfg.pop("eagle_aux_hidden_state_layer_ids", None)
            if place == "top":
                cfg["eagle_aux_hidden_state_layer_ids"] = ids
            elif place == "inner":
                inner["eagle_aux_hidden_state_layer_ids"] = ids
            return cfg
        cfg.pop("eagle_aux_hidden_state_layer_ids", None)
        eagle = cfg.pop("eagle_config", None)
        eagle = {k: v for k, v in (eagle or {}).items() if k not in ("eagle_aux_hidden_state_layer_ids", "layer_ids")}
        if place == "top":
            cfg["eagle_aux_hidden_state_layer_ids"] = ids
        elif place in ("eagle_config", "eagle_config.layer_ids"):
            eagle["layer_ids" if place.endswith("layer_ids") else "eagle_aux_hidden_state_layer_ids"] = ids
        if eagle:
            cfg["eagle_config"] = eagle
        return cfg

    places = (
        ("top", "inner", None)
        if "speculators_model_type" in config
        else ("top", "eagle_config", "eagle_config.layer_ids", None)
    )
    out = {f"ids-{p or 'none'}": with_ids(p) for p in places}
    if "speculators_model_type" not in config:
        out["mtp-model-type"] = {
            **with_ids("top"),
            "model_type": "qwen3_next" if "q_lora_rank" not in str(config) else "deepseek_v3",
        }
    return out


def _agreement(out: Path) -> None:
    """describe, validate's context and the reference drafter read `out` as read_config does."""
    ckpt = open_checkpoint(out)
    info = describe(ckpt, default_release())
    view = read_config(ckpt.config, default_release())
    ctx = build_context(ckpt, info)
    assert (ctx.view.aux_ids_v1, ctx.aux_count, ctx.flags) == (view.aux_ids_v1, view.aux_count, view.flags)
    assert info.num_aux == view.aux_count, "fc width and vLLM's aux count disagree"
    assert info.aux_layer_ids == view.aux_ids_v1 and {f: info.flags[f].vllm for f in FLAGS} == {
        f: view.flags[f] for f in FLAGS
    }
    assert view.builds_eagle3 and info.vllm_class == view.draft_class.name
    if view.attention != "mla":
        from eagle_convert.reference.drafter import draft_config_from_dict

        ref = draft_config_from_dict(ckpt.config, default_release())
        assert ref.num_aux_hidden_states == view.aux_count
        assert ref.aux_layer_ids == tuple(view.aux_ids_v1 or ()) or (ref.aux_layer_ids is None and not view.aux_ids_v1)
        assert {f: getattr(ref, f) for f in FLAGS} == {f: view.flags[f] for f in FLAGS}


def _upgrade_or_refusal(src: Path, out: Path, ids: list[int], layout: str = "vllm") -> str | None:
    """Upgrade `src`; None on success, else the one-line refusal."""
    ckpt = open_checkpoint(src)
    info = describe(ckpt, default_release())
    try:
        plan = plan_upgrade(ckpt, info, layout=layout, aux_layer_ids=None if info.aux_layer_ids else ids)
    except (UpgradeRefusedError, UsageError) as exc:
        message = str(exc)
        # One line that names the draft or the option to pass (e.g. --layout ... needs --target).
        assert "\n" not in message and (src.name in message or "--" in message), message
        return message
    apply_upgrade(plan, out)
    return None


def test_upgrade_output_validates_and_every_reader_agrees(built_fixtures, tmp_path: Path) -> None:
    from fixtures.drafts import EXPECTED, FIXTURE_MATRIX

    upgraded, refused = [], []
    for name, spec in FIXTURE_MATRIX.items():
        src = Path(built_fixtures(name))
        ids = list(spec.resolved_aux_ids)
        base = json.loads((src / "config.json").read_text()) if (src / "config.json").is_file() else None
        if base is None or not EXPECTED[name]["vllm_loads"] and spec.layout != "nemo":
            continue
        for variant, cfg in _variants(base, ids).items():
            work = tmp_path / f"{name}-{variant}"
            shutil.copytree(src, work)
            (work / "config.json").write_text(json.dumps(cfg))
            layouts = ("vllm", "speculators") if "speculators_model_type" in cfg else ("vllm",)
            for layout in layouts:
                out = tmp_path / f"{work.name}-{layout}-31"
                refusal = _upgrade_or_refusal(work, out, ids, layout)
                if refusal is not None:
                    refused.append((work.name, refusal))
                    continue
                report = validate_checkpoint(out)
                assert not report.errors, (work.name, layout, [(f.code, f.message) for f in report.errors])
                _agreement(out)
                upgraded.append(work.name)
    # EAGLE-3 inputs upgrade; only 3.1 / norm_before_fc inputs are refused.
    assert upgraded and all(
        n.split("-ids-")[0].split("-mtp-")[0] not in ("specforge-eagle3", "speculators-eagle3-a4", "vllm-tiny")
        for n, _ in refused
    ), refused
    assert {n for n, _ in refused} <= {
        f"{n}-{v}"
        for n, s in FIXTURE_MATRIX.items()
        if s.variant != "eagle3"
        for v in (
            "ids-top",
            "ids-inner",
            "ids-none",
            "ids-eagle_config",
            "ids-eagle_config.layer_ids",
            "mtp-model-type",
        )
    }, refused


@pytest.mark.parametrize("model_type", sorted(rewrites.MTP_MODEL_TYPES))
def test_upgrade_never_writes_an_mtp_model_type(model_type: str, built_fixtures, tmp_path: Path) -> None:
    work = tmp_path / "draft"
    shutil.copytree(built_fixtures("specforge-eagle3"), work)
    cfg = json.loads((work / "config.json").read_text())
    (work / "config.json").write_text(json.dumps({**cfg, "model_type": model_type}))
    first = rewrites.MTP_MODEL_TYPES[model_type]
    assert validate_checkpoint(work, vllm_version=first).errors  # E302 on the input, from the release that rewrites it
    assert _upgrade_or_refusal(work, tmp_path / "out", [1, 3, 4]) is None
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == "llama"
    assert not validate_checkpoint(tmp_path / "out").errors
    _agreement(tmp_path / "out")


def test_mtp_model_type_is_rewritten_by_upgrade(built_fixtures, tmp_path: Path) -> None:
    src = Path(built_fixtures("kimi-mla-eagle3"))
    work = tmp_path / "mla"
    shutil.copytree(src, work)
    cfg = json.loads((work / "config.json").read_text())
    cfg["model_type"] = "deepseek_v3"
    (work / "config.json").write_text(json.dumps(cfg))
    assert (
        describe(open_checkpoint(work), default_release()).vllm_class is None
    )  # inspect no longer names an EAGLE-3 class
    ckpt = open_checkpoint(work)
    plan = plan_upgrade(
        ckpt,
        describe(ckpt, default_release()),
        aux_layer_ids=None if cfg.get("eagle_aux_hidden_state_layer_ids") else [2, 4, 5],
    )
    assert plan.config_after["model_type"] == "kimi_k2"
    assert any("'deepseek_v3' makes vLLM rewrite the draft into an MTP model" in w for w in plan.warnings)
    apply_upgrade(plan, tmp_path / "out")
    assert not validate_checkpoint(tmp_path / "out").errors


# ----------------------------------------------------------------------------- and vLLM itself


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")
def test_vllm_loader_agrees_with_the_model(tmp_path: Path) -> None:
    """One loader worker, several upgraded variants: vLLM's applied flags, aux count and taps equal ours."""
    from eagle_convert.vllm.strict_load import check_many_with_vllm
    from fixtures.drafts import VLLM_TINY, build_draft
    from fixtures.target import build_target

    target = build_target(tmp_path / "target")
    specs = {
        "specforge": replace(VLLM_TINY, layout="specforge", aux_ids=(1, 3, 4)),
        "speculators-a4": replace(VLLM_TINY, layout="speculators", num_aux=4),
        "qwen3": replace(VLLM_TINY, layout="speculators", arch="qwen3"),
        "vllm-no-ids": replace(VLLM_TINY, layout="vllm"),
    }
    outs = []
    for name, spec in specs.items():
        src = build_draft(tmp_path / name, spec)
        if name == "vllm-no-ids":  # an MTP model_type as well: upgrade must write a safe one
            cfg = json.loads((src / "config.json").read_text())
            cfg["model_type"] = "qwen3_next"
            (src / "config.json").write_text(json.dumps(cfg))
        assert _upgrade_or_refusal(src, tmp_path / f"{name}-31", list(spec.resolved_aux_ids)) is None
        outs.append(tmp_path / f"{name}-31")
    reports = check_many_with_vllm(outs, target, timeout_s=600)
    for out, r in zip(outs, reports):
        view = read_config(json.loads((out / "config.json").read_text()), default_release())
        assert r.ok, (out.name, r.error, r.problems, r.unwritten)
        applied = r.applied
        assert applied["class"] == view.draft_class.name, out.name
        assert applied["num_aux_hidden_states"] == view.aux_count, out.name
        assert {f: applied[f] for f in FLAGS} == {f: view.flags[f] for f in FLAGS}, out.name
        assert tuple(applied["aux_layers_used_v1"]) == view.runtime_aux_ids(8), out.name
