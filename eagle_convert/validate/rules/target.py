"""Cross-checks against the target's config.json (`--target PATH_OR_REPO`).

A draft belongs to exactly one target: its vocabulary, the width of the hidden states it fuses,
the layers it taps and the rope it was trained with all come from that target. Multimodal
targets keep these fields in `text_config`, which is merged over the top level here. The checks
that need the target's weights (embedding, lm_head rows) live in `targetweights.py`; they open the
target's tensor headers only when a check needs them (`Target.weights`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft.checkpoint import CONFIG_FNAME, Checkpoint, CheckpointRef, load_from_source
from eagle_convert.draft.kind import ensure_target_config
from eagle_convert.errors import CheckpointNotFoundError, ConfigError
from eagle_convert.io.source import LocalSource, Source, read_json
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.vllm_model.config import rope_parameters
from eagle_convert.vllm_model.tables import DRAFT_QUANT_SOURCE, ROPE_DEFAULTS, ROPE_KEYS


@dataclass
class Target:
    """The target model: its (text) config, and its tensor headers once a check asks for them."""

    description: str
    config: dict[str, Any]
    source: Source
    _weights: Checkpoint | None = field(default=None, repr=False)
    weights_note: str | None = None  # why the weights cannot be read (None: not tried or read)

    def weights(self) -> Checkpoint | None:
        """config + headers of the target's weight files (byte ranges only); None when it has none."""
        if self._weights is None and self.weights_note is None:
            try:
                self._weights = load_from_source(self.source)
            except CheckpointNotFoundError as exc:  # a folder with config.json only: config checks still run
                self.weights_note = f"target weights not read ({exc.message})"
        return self._weights


def load_target(ref: str | Path) -> Target:
    """A target folder, config.json file or hub repo; only config.json is read here."""
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
        raise CheckpointNotFoundError(
            f"{source.description}: no config.json (needed by --target)",
            hint="pass the target model's folder or hub repo id",
        )
    config = read_json(source, CONFIG_FNAME)
    ensure_target_config(config, f"--target {source.description}")
    text = config.get("text_config")
    if isinstance(text, dict):
        config = {**config, **text}
    if not isinstance(config.get("hidden_size"), int):
        raise ConfigError(f"{source.description}/config.json: no integer hidden_size; is this the target model?")
    return Target(source.description, config, source)


def load_target_config(ref: str | Path) -> tuple[str, dict[str, Any]]:
    """(description, text config) of a target folder, config.json file or hub repo."""
    target = load_target(ref)
    return target.description, target.config


def _nested(cfg: dict[str, Any]) -> bool:
    """Per-layer-type rope dicts (Gemma-style): not compared here."""
    params = cfg.get("rope_parameters")
    return isinstance(params, dict) and any(isinstance(v, dict) for v in params.values())


def _explicit_theta(cfg: dict[str, Any]) -> bool:
    return any(
        isinstance(d, dict) and "rope_theta" in d for d in (cfg, cfg.get("rope_parameters"), cfg.get("rope_scaling"))
    )


def rope_findings(ctx: Context) -> list[Finding]:
    """W504: the rope vLLM builds for the draft against the target's, key by key (YaRN included)."""
    tgt = ctx.target or {}
    if (
        _nested(ctx.vcfg)
        or _nested(tgt)
        or not any(k in tgt for k in ("rope_theta", "rope_scaling", "rope_parameters"))
    ):
        return []  # a target config without any rope field is a partial copy: its defaults prove nothing
    draft, target = ({**ROPE_DEFAULTS, **rope_parameters(cfg)} for cfg in (ctx.vcfg, tgt))
    keys = [
        k
        for k in ROPE_KEYS
        if (k != "rope_theta" or _explicit_theta(tgt))
        and draft.get(k) != target.get(k)
        and not _same_number(draft.get(k), target.get(k))
    ]
    if not keys:
        return []
    diffs = "; ".join(f"{k} {draft.get(k)!r} vs the target's {target.get(k)!r}" for k in keys)
    defaulted = (
        " (no rope_theta in the draft's config: vLLM uses 10000)"
        if "rope_theta" in keys and not _explicit_theta(ctx.vcfg)
        else ""
    )
    where = "rope_theta" if keys == ["rope_theta"] else "rope_scaling"
    return [
        finding(
            "W504", f"the draft's rope as vLLM builds it differs from the target's: {diffs}{defaulted}", field=where
        )
    ]


def _same_number(a: Any, b: Any) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and float(a) == float(b)


def quant_findings(ctx: Context) -> list[Finding]:
    """I508: a quantized target beside a draft without its own quantization config."""
    tq = (ctx.target or {}).get(DRAFT_QUANT_SOURCE)
    if not isinstance(tq, dict) or ctx.vcfg.get(DRAFT_QUANT_SOURCE):
        return []
    method = tq.get("quant_method", "unknown method")
    return [
        finding(
            "I508",
            f"the target is quantized ({method}) and the draft has no quantization_config: vLLM "
            "0.32 serves the draft unquantized (get_draft_quant_config reads the draft's own "
            "config only)",
            field="quantization_config",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    tgt = ctx.target
    if tgt is None:
        return []
    out: list[Finding] = []
    name = ctx.target_source
    v, tv = ctx.vcfg.get("vocab_size"), tgt.get("vocab_size")
    if isinstance(tv, int) and v is not None and v != tv:
        out.append(
            finding(
                "E501",
                f"vocab_size is {v} but the target ({name}) has {tv}",
                field="vocab_size",
                fix=f"Set vocab_size: {tv} (and check that this draft was trained for this target).",
            )
        )
    t, th = ctx.env.get("T"), tgt.get("hidden_size")
    if t is not None and t != th:
        field = "target_hidden_size" if "target_hidden_size" in ctx.vcfg else "hidden_size"
        out.append(
            finding(
                "E502",
                f"the draft expects aux hidden states of width {t} ({field}) but the target "
                f"({name}) has hidden_size {th}",
                field=field,
                fix=f"Set target_hidden_size: {th} if the weights are {th} wide; otherwise this draft "
                "belongs to another target.",
            )
        )
    return out + rope_findings(ctx) + quant_findings(ctx)
