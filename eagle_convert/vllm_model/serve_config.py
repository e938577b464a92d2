"""The deployment's serve config: `--speculative-config` (and `--max-model-len`) read as a vLLM release reads it.

`parse_serve_config` takes the JSON object (or a file holding it) exactly as `vllm serve
--speculative-config` does and refuses, with one line naming the key and the release, what that
release's `SpeculativeConfig` would refuse before loading a weight: not JSON, not an object, an
unknown key (`speculative.KEYS`), a value of the wrong type or outside the release's literals, and
the FLy and max_model_len checks of `SpeculativeConfig.__post_init__`. What the config means for
the draft (method, k, lossy sampling, lm_head quantization, quantization, context) is judged by the
validate rule family `serve` (validate/rules/serve.py); `check` and `smoke` run their engines with
`engine_config(draft)`.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.vllm_model import speculative as sp
from eagle_convert.vllm_model.releases import Release

OPTION = "--speculative-config"


@dataclass(frozen=True)
class ServeConfig:
    """A parsed serve config: the speculative-config keys as vLLM `release` reads them."""

    data: dict[str, Any]  # keys normalized as vLLM does ("-" -> "_" from 0.26.0)
    release: Release
    source: str = OPTION  # "--speculative-config" or "--speculative-config FILE"
    max_model_len: int | None = None  # --max-model-len: the target's (served) context
    given: bool = True  # False: no --speculative-config, only --max-model-len

    @property
    def method(self) -> str | None:
        return self.data.get("method")

    @property
    def k(self) -> int | None:
        return self.data.get("num_speculative_tokens")

    @property
    def rejection_sample_method(self) -> str:
        return self.data.get("rejection_sample_method", "standard")

    @property
    def model(self) -> str | None:
        return self.data.get("model")

    @property
    def draft_context(self) -> int | None:
        """The longest context the draft drafts at: its own max_model_len (longer sequences skip
        speculation, SpeculativeConfig._maybe_override_draft_max_model_len), else the served one."""
        return self.data.get("max_model_len") or self.max_model_len

    def engine_config(self, draft: str | Path, k: int) -> dict[str, Any]:
        """The `speculative_config` an engine for `draft` gets (`speculative_config_for`)."""
        return speculative_config_for(draft, k, self.data)

    def engine_max_model_len(self, needed: int) -> int:
        """The target's max_model_len for an engine that must hold `needed` tokens per sequence:
        --max-model-len where given (refused when too short), else `needed`, raised to the draft's
        max_model_len (vLLM refuses a draft max_model_len above the target's).

        Raises:
            UsageError: --max-model-len is shorter than `needed`.
        """
        if self.max_model_len is not None:
            if self.max_model_len < needed:
                raise UsageError(
                    f"{{max_model_len={self.max_model_len}}} is shorter than the longest prompt plus the tokens "
                    f"generated and one draft round ({needed})",
                    hint="raise {max_model_len}, or lower {max_new_tokens} / pick shorter prompts",
                    options=("max_model_len", "max_new_tokens"),
                )
            return self.max_model_len
        return max(needed, self.data.get("max_model_len") or 0)

    def to_dict(self) -> dict[str, Any]:
        return {"speculative_config": dict(self.data) if self.given else None, "max_model_len": self.max_model_len}

    def line(self) -> str:
        """One line for the report heads: the keys as read, and the served context."""
        parts = [f"{json.dumps(self.data)} ({self.source})"] if self.given else []
        if self.max_model_len is not None:
            parts.append(f"--max-model-len {self.max_model_len}")
        return "; ".join(parts)


def speculative_config_for(draft: str | Path, k: int, keys: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `speculative_config` of a vLLM engine that drafts with `draft` at `k` tokens per round:
    method eagle3 and `k` unless the deployment's `keys` (its --speculative-config) say otherwise,
    then every one of `keys`, and `draft` as the model. The one place check, smoke, report and the
    engine load check build it."""
    return {"method": sp.EAGLE3_METHOD, "num_speculative_tokens": k, **(keys or {}), "model": str(draft)}


def _where(release: Release) -> str:
    return f"vLLM {release.version}"


def _load(value: str | dict[str, Any]) -> tuple[Any, str]:
    """The JSON value and where it came from (the option's text, or a file)."""
    if isinstance(value, dict):
        return value, OPTION
    text = value.strip()
    if not text.startswith(("{", "[", '"')) and Path(text).expanduser().is_file():
        path = Path(text).expanduser()
        try:
            raw = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{OPTION} {path}: cannot read: {exc}") from None
        try:
            return json.loads(raw), f"{OPTION} {path}"
        except ValueError as exc:
            raise UsageError(f"{OPTION} {path}: not JSON ({exc})") from None
    try:
        return json.loads(text), OPTION
    except ValueError as exc:
        raise UsageError(
            f"{OPTION}: neither JSON ({exc}) nor a JSON file",
            hint='give the object vllm serve takes, e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\'',
        ) from None


def _unknown(key: str, release: Release, known: list[str], where: str) -> UsageError:
    entry = sp.entry(sp.KEYS, key)
    if entry is not None:  # a key of another release
        return UsageError(
            f"{where}: unknown key {key!r} for {_where(release)}: {sp.SOURCE} has it in {entry.span()}",
            hint="drop it, or name the release you serve on with {vllm_version}",
            options=("vllm_version",),
        )
    if key in sp.INTERNAL_KEYS:
        return UsageError(f"{where}: {key!r} is set by vLLM itself ({_where(release)} {sp.SOURCE}), not by the user")
    if "-" in key and not release.at_least(sp.DASHES_FROM) and key.replace("-", "_") in known:
        return UsageError(
            f"{where}: unknown key {key!r} for {_where(release)} (vLLM turns '-' into '_' only from {sp.DASHES_FROM})",
            hint=f"write {key.replace('-', '_')!r}",
        )
    close = difflib.get_close_matches(key, known, n=1)
    return UsageError(
        f"{where}: unknown key {key!r} for {_where(release)} ({sp.SOURCE})",
        hint=f"did you mean {close[0]!r}?" if close else None,
    )


def _int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _number(value: Any, minimum: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= minimum


def _check_values(data: dict[str, Any], release: Release, where: str) -> None:
    """What SpeculativeConfig's field types and literals refuse (pydantic, before any weight is read)."""
    rel = _where(release)
    for key, minimum in (
        ("num_speculative_tokens", 1),
        ("max_model_len", 1),
        ("fly_window_size", 1),
        ("fly_entropy_top_k", 1),
        ("draft_tensor_parallel_size", 1),
    ):
        if key in data and data[key] is not None and not _int(data[key], minimum):
            raise UsageError(f"{where}: {key} must be an integer >= {minimum}, not {json.dumps(data[key])} ({rel})")
    if "fly_entropy_threshold" in data and not _number(data["fly_entropy_threshold"], 0):
        raise UsageError(f"{where}: fly_entropy_threshold must be a number >= 0 ({rel})")
    for key in ("model", "quantization", "revision"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise UsageError(f"{where}: {key} must be a string, not {json.dumps(data[key])} ({rel})")
    for key, table in (
        ("method", sp.METHODS),
        ("rejection_sample_method", sp.REJECTION_METHODS),
        ("draft_sample_method", sp.DRAFT_SAMPLE_METHODS),
    ):
        value = data.get(key)
        if value is None:
            continue
        choices = sp.accepted(table, release)
        if value not in choices:
            entry = sp.entry(table, value) if isinstance(value, str) else None
            extra = f"; {value!r} exists in {entry.span()}" if entry else ""
            shown = ", ".join(choices) if len(choices) <= 8 else ", ".join(choices[:8]) + ", ..."
            raise UsageError(f"{where}: {key} {json.dumps(value)} is not one {rel} accepts ({shown}{extra})")
    quant = data.get("draft_lm_head_quantization")
    if quant is not None and quant not in sp.LM_HEAD_QUANTIZATIONS:
        raise UsageError(
            f"{where}: draft_lm_head_quantization {json.dumps(quant)} is not one {rel} accepts "
            f"({', '.join(sp.LM_HEAD_QUANTIZATIONS)})"
        )


def _check_post_init(data: dict[str, Any], release: Release, where: str, max_model_len: int | None) -> None:
    """SpeculativeConfig.__post_init__ checks that need no weights (0.33.0 FLy; every release's max_model_len)."""
    rel = _where(release)
    k = data.get("num_speculative_tokens")
    if data.get("rejection_sample_method") == "fly" and k is not None:
        if k < sp.FLY_MIN_K:
            raise UsageError(
                f'{where}: rejection_sample_method "fly" needs num_speculative_tokens >= {sp.FLY_MIN_K}, not {k} '
                f'({rel} raises "FLy requires num_speculative_tokens to be at least 2.")'
            )
        window = data.get("fly_window_size")
        if window is not None and window >= k:
            raise UsageError(
                f"{where}: fly_window_size {window} must be smaller than num_speculative_tokens {k} "
                f'({rel} raises "FLy requires fly_window_size to be smaller than num_speculative_tokens.")'
            )
    method = data.get("method") or sp.EAGLE3_METHOD  # unset: an EAGLE-3 draft is served as eagle3
    if release.at_least(sp.METHOD_OPTIONS_FROM) and method in ("eagle", sp.EAGLE3_METHOD):
        for option in sp.METHOD_SPECIFIC_OPTIONS:
            if data.get(option) is not None and option not in sp.EAGLE_SUPPORTED_OPTIONS:
                raise UsageError(
                    f"{where}: {option} is not supported with speculative method {method!r} ({rel} "
                    "SpeculativeConfig.__post_init__ raises ValueError: only the methods whose "
                    "SpeculatorConfig lists it take it)",
                    hint=f"drop {option} (or set it to null)",
                )
    draft_len = data.get("max_model_len")
    if draft_len is not None and max_model_len is not None and draft_len > max_model_len:
        raise UsageError(
            f"{where}: max_model_len {draft_len} is larger than {{max_model_len={max_model_len}}} ({rel} "
            "SpeculativeConfig._maybe_override_draft_max_model_len raises: the draft's max_model_len cannot be "
            "larger than the target's)",
            options=("max_model_len",),
        )


def load_speculative_config(value: str | dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The JSON object `value` holds (JSON text, a JSON file's path, or a dict) and where it came from,
    for any release.

    Raises:
        UsageError: not JSON, an unreadable file, or not a JSON object.
    """
    raw, where = _load(value)
    if not isinstance(raw, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(raw), "a number")
        raise UsageError(f"{where}: must be a JSON object (as vllm serve --speculative-config takes), not {kind}")
    return raw, where


def parse_serve_config(
    value: str | dict[str, Any] | None,
    release: Release,
    *,
    max_model_len: int | None = None,
    source: str | None = None,
) -> ServeConfig | None:
    """The serve config `value` (JSON text, a JSON file's path, or a dict) for vLLM `release`.

    Args:
        value: what `--speculative-config` got (None: only `max_model_len`, or nothing at all).
        max_model_len: `--max-model-len`, the context the target is served with.
        source: where a dict `value` came from, for messages (default: the option's name).

    Returns:
        None when neither is given.

    Raises:
        UsageError: one line naming the key and the release (exit 2).
    """
    if value is None:
        return None if max_model_len is None else ServeConfig({}, release, max_model_len=max_model_len, given=False)
    raw, where = load_speculative_config(value)
    where = source or where
    known = sp.accepted(sp.KEYS, release)
    dashes = release.at_least(sp.DASHES_FROM)
    data: dict[str, Any] = {}
    for key, item in raw.items():
        name = key.replace("-", "_") if dashes else key
        if name not in known:
            raise _unknown(key, release, known, where)
        data[name] = item
    if "tensor_parallel_size" in data:  # a field, but _verify_args refuses it in every known release
        raise UsageError(
            f"{where}: 'tensor_parallel_size' is not a valid argument in the speculative_config ({_where(release)} "
            "SpeculativeConfig._verify_args raises ValueError)",
            hint="write draft_tensor_parallel_size",
        )
    _check_values(data, release, where)
    _check_post_init(data, release, where, max_model_len)
    return ServeConfig(data, release, where, max_model_len)


def recorded_k(config: dict[str, Any]) -> tuple[int | None, str]:
    """The k a draft records for itself, and where: a speculators config's first proposal method's
    speculative_tokens (what `vllm serve DRAFT` uses, transformers_utils/configs/speculators/base.py
    `SpeculatorsConfig.build_vllm_speculative_config`)."""
    spec = config.get("speculators_config")
    methods = spec.get("proposal_methods") if isinstance(spec, dict) else None
    first = methods[0] if isinstance(methods, list) and methods and isinstance(methods[0], dict) else {}
    k = first.get("speculative_tokens")
    if _int(k, 1):
        return k, "speculators_config.proposal_methods[0].speculative_tokens"
    return None, ""
