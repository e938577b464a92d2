"""Cross-checks against the target's config.json (`--target PATH_OR_REPO`; reads that one file).

A draft belongs to exactly one target: its vocabulary, the width of the hidden states it fuses,
the layers it taps and the rope it was trained with all come from that target. Multimodal
targets keep these fields in `text_config`, which is merged over the top level here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.draft.checkpoint import CONFIG_FNAME, CheckpointRef
from eagle_convert.errors import CheckpointNotFoundError, ConfigError
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.io.source import LocalSource, Source, read_json
from eagle_convert.validate.rules.context import Context


def load_target_config(ref: str | Path) -> tuple[str, dict[str, Any]]:
    """(description, text config) of a target folder, config.json file or hub repo."""
    parsed = CheckpointRef.parse(str(ref))
    if parsed.is_hub:
        from eagle_convert.io.hub import HubSource

        source: Source = HubSource(parsed.repo, parsed.revision)  # type: ignore[arg-type]
    else:
        path = parsed.local
        if path is not None and path.is_file() and path.name == CONFIG_FNAME:
            path = path.parent
        source = LocalSource(path)  # type: ignore[arg-type]
    if CONFIG_FNAME not in source.list_files():
        raise CheckpointNotFoundError(f"{source.description}: no config.json (needed by --target)",
                                      hint="pass the target model's folder or hub repo id")
    config = read_json(source, CONFIG_FNAME)
    text = config.get("text_config")
    if isinstance(text, dict):
        config = {**config, **text}
    if not isinstance(config.get("hidden_size"), int):
        raise ConfigError(f"{source.description}/config.json: no integer hidden_size; is this the target model?")
    return source.description, config


def _rope(cfg: dict[str, Any]) -> tuple[Any, Any]:
    """(rope_theta, rope scaling without theta) from either the old or the transformers-5 fields."""
    params = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    theta = params.get("rope_theta", cfg.get("rope_theta"))
    scaling = {k: v for k, v in params.items() if k != "rope_theta"} or cfg.get("rope_scaling") or None
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) == "default" and len(scaling) == 1:
        scaling = None
    return (float(theta) if isinstance(theta, (int, float)) and not isinstance(theta, bool) else theta), scaling


def check(ctx: Context) -> list[Finding]:
    tgt = ctx.target
    if tgt is None:
        return []
    out: list[Finding] = []
    name = ctx.target_source
    v, tv = ctx.vcfg.get("vocab_size"), tgt.get("vocab_size")
    if isinstance(tv, int) and v is not None and v != tv:
        out.append(finding("E501", f"vocab_size is {v} but the target ({name}) has {tv}", field="vocab_size",
                           fix=f"Set vocab_size: {tv} (and check that this draft was trained for this target)."))
    t, th = ctx.env.get("T"), tgt.get("hidden_size")
    if t is not None and t != th:
        field = "target_hidden_size" if "target_hidden_size" in ctx.vcfg else "hidden_size"
        out.append(finding("E502", f"the draft expects aux hidden states of width {t} ({field}) but the target "
                                   f"({name}) has hidden_size {th}", field=field,
                           fix=f"Set target_hidden_size: {th} if the weights are {th} wide; otherwise this draft "
                               "belongs to another target."))
    d_theta, d_scaling = _rope(ctx.vcfg)
    t_theta, t_scaling = _rope(tgt)
    if d_theta is not None and t_theta is not None and d_theta != t_theta:
        out.append(finding("W504", f"rope_theta is {d_theta!r} but the target's is {t_theta!r}", field="rope_theta"))
    if (d_scaling or t_scaling) and d_scaling != t_scaling:
        out.append(finding("W504", f"rope scaling {d_scaling} differs from the target's {t_scaling}",
                           field="rope_scaling"))
    return out
