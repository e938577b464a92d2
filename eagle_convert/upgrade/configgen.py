"""The config.json an upgrade writes: format conversion plus the key rules of `schemas/upgrade-config.json`.

Which keys are set where (top level, `eagle_config`, `transformer_layer_config`) is data; this
module only converts between the native and speculators formats and applies the rules.
"""

from __future__ import annotations

import copy
from typing import Any

from eagle_convert.draft import CheckpointRef, Target, load_schema, load_target
from eagle_convert.errors import UsageError
from eagle_convert.vllm_model import (
    ARCHITECTURES,
    DRAFT_CLASSES,
    PARALLEL_DRAFTING_ARCHITECTURES,
    SAFE_MODEL_TYPE,
    SPECULATORS_ARCHITECTURES,
    WRITE_ARCHITECTURE,
    Release,
    all_releases,
    flatten_speculators,
    lookup,
    mtp_rewrite,
)

_MISSING = object()


def read_target(ref: str) -> Target:
    """The target's config.json (local folder, config file, or hub repo; never its weights), as every
    command reads it (`draft.target.Target`); an upgrade needs its layer count.

    Raises:
        ConfigError: the target has no positive num_hidden_layers (where vLLM reads it).
    """
    target = load_target(ref)  # refuses a draft: default aux ids from a draft's 1 layer would be nonsense
    target.require_layers("pass {aux_layer_ids} instead", options=("aux_layer_ids",))
    return target


def speculators_verifier(target: Target) -> tuple[str, str | None]:
    """(the verifier to write, a one-line warning or None) for `upgrade --layout speculators --target`.

    vLLM 0.33's `vllm serve DRAFT` needs a hub repo id (vllm_model/verifier.py), so a local --target is
    written as the repo it names where it tells one: a folder in the HF cache (models--ORG--NAME/...),
    else its config's `_name_or_path` (transformers writes it on save) when that is a repo id; a hub --target drops its @revision.
    """
    from eagle_convert.draft import hub_repo_id
    from eagle_convert.vllm_model import verifier_problem

    parsed = CheckpointRef.parse(target.ref)
    candidates = [parsed.repo] if parsed.is_hub else [hub_repo_id(target.ref), target.config.get("_name_or_path")]
    for name in candidates:
        if name and verifier_problem(name) is None:
            return name, None
    return target.ref, (
        f"speculators_config.verifier.name_or_path is the local path {target.ref!r}: vLLM 0.33 refuses "
        "`vllm serve DRAFT` for it; serve with --model TARGET --speculative-config '{\"model\": DRAFT, ...}' "
        "(or pass the target's hub repo id as --target)"
    )


def choose_architectures(current: list[str], attention: str) -> list[str]:
    """A registered vLLM EAGLE-3 architecture for this attention kind (keeps a registered input name).

    P-EAGLE names are replaced too: the upgraded draft is a sequential EAGLE-3.1 draft.
    """
    name = current[0] if current else None
    cls = DRAFT_CLASSES.get(ARCHITECTURES.get(name or "", ""))
    if name and cls and cls.attention == attention and name not in PARALLEL_DRAFTING_ARCHITECTURES:
        return [name]
    return [WRITE_ARCHITECTURE[attention]]


def choose_model_type(config: dict[str, Any], attention: str) -> Any:
    """The input's model_type, unless some known vLLM release would rewrite the draft into an MTP model
    because of it (an output must serve on whichever release its user deploys on)."""
    model_type = config.get("model_type")
    if any(mtp_rewrite({"model_type": model_type}, rel) is not None for rel in all_releases()):
        return SAFE_MODEL_TYPE[attention]
    return model_type


def to_native(config: dict[str, Any], release: Release) -> dict[str, Any]:
    """A plain draft config equal to what vLLM reads from a speculators config (`flatten_speculators`).

    The class vLLM picks is left to `choose_architectures`; torch_dtype is carried over.
    """
    out = copy.deepcopy(flatten_speculators(config, release))
    out.pop("architectures", None)
    if out.get("draft_vocab_size") is None:
        out.pop("draft_vocab_size", None)
    if config.get("torch_dtype") is not None:
        out["torch_dtype"] = copy.deepcopy(config["torch_dtype"])
    out.setdefault("model_type", "llama")
    return {"architectures": [], **out}


def verifier_block(name_or_path: Any, target: Target | None) -> tuple[dict[str, Any], str | None]:
    """`speculators_config.verifier` with the target's `architectures` (a one-line warning or None).

    speculators refuses a verifier without `architectures` (pydantic `Field required`, speculators
    0.3.0 ... 0.9.0 `config.py` VerifierConfig); vLLM reads only `name_or_path` (0.32.0
    `transformers_utils/configs/speculators/base.py` validate_speculators_config), so an
    empty list loads in both, but speculators cannot then check a verifier against it.
    """
    archs = list(target.architectures) if target is not None else []
    if archs:
        return {"name_or_path": name_or_path, "architectures": archs}, None
    why = "the target's config.json names none" if target is not None else "no --target to read them from"
    return {"name_or_path": name_or_path, "architectures": []}, (
        f"speculators_config.verifier.architectures is written as [] ({why}): speculators loads it but "
        "cannot check a verifier against it; pass a --target whose config.json has architectures"
    )


def complete_verifier(config: dict[str, Any], target: Target | None, warnings: list[str]) -> dict[str, Any]:
    """A speculators config whose verifier lacks `architectures`, given them from `target` (or [] and a
    warning), so speculators' `from_pretrained` accepts it; other configs are returned unchanged."""
    spec = config.get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    if not isinstance(verifier, dict) or isinstance(verifier.get("architectures"), list):
        return config
    block, warning = verifier_block(verifier.get("name_or_path"), target)
    if warning:
        warnings.append(warning)
    out = copy.deepcopy(config)
    out["speculators_config"]["verifier"] = {**verifier, **block, "name_or_path": verifier.get("name_or_path")}
    return out


def to_speculators(config: dict[str, Any], attention: str, verifier: dict[str, Any]) -> dict[str, Any]:
    """Wrap a native draft config in the speculators format (inner `transformer_layer_config`);
    `verifier` is the `speculators_config.verifier` block (`verifier_block`)."""
    data = load_schema("upgrade-config.json")
    model_type = attention if attention in SPECULATORS_ARCHITECTURES["eagle3"] else None
    if model_type is None:
        raise UsageError(
            f"{{layout=speculators}} has no {attention} draft: vLLM maps transformer_layer_config."
            f"model_type to llama or qwen3 only",
            hint="use {layout=vllm}",
            options=("layout",),
            field="transformer_layer_config.model_type",
        )
    inner = {k: copy.deepcopy(v) for k, v in config.items() if k not in data["native_only_keys"]}
    inner = {"model_type": model_type, **inner}
    out = copy.deepcopy(data["speculators_skeleton"])
    out["speculators_config"]["verifier"] = copy.deepcopy(verifier)
    out["transformer_layer_config"] = inner
    for key in ("draft_vocab_size", "target_hidden_size", "torch_dtype"):
        if config.get(key) is not None:
            out[key] = config[key]
    return out


def _set(config: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = copy.deepcopy(value)


def _remove(config: dict[str, Any], path: str) -> None:
    *parents, leaf = path.split(".")
    parent = lookup(config, ".".join(parents)) if parents else config
    if isinstance(parent, dict):
        parent.pop(leaf, None)


def _applies(rule: dict[str, Any], config: dict[str, Any], values: dict[str, Any]) -> bool:
    when = rule.get("when", "always")
    path = rule["path"]
    exists = lookup(config, path) is not None
    if when == "always":
        return True
    if when == "exists":
        return exists
    if when == "parent_exists":
        parent = path.rpartition(".")[0]
        return isinstance(lookup(config, parent), dict)
    if when == "num_aux_not_3_or_exists":
        return values["num_aux"] != 3 or exists
    raise ValueError(f"schemas/upgrade-config.json: unknown condition {when!r}")


def apply_rules(config: dict[str, Any], fmt: str, layout: str, values: dict[str, Any]) -> dict[str, Any]:
    """A copy of `config` with every rule of `fmt` ("native" | "speculators") applied for `layout`."""
    out = copy.deepcopy(config)
    for rule in load_schema("upgrade-config.json")["formats"][fmt]:
        if "layouts" in rule and layout not in rule["layouts"]:
            continue
        if not _applies(rule, out, values):
            continue
        if rule.get("remove"):
            _remove(out, rule["path"])
        else:
            _set(out, rule["path"], values[rule["value"]])
    return out
