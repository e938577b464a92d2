"""Is this checkpoint an EAGLE-3 draft at all? The one answer inspect, validate, upgrade, smoke and finetune use.

Swapped arguments are the most common slip: pointed at the target's folder, the layout rules would
happily call a full Llama "a NeMo EAGLE-3 draft with 8 layers". The rules under `not_drafts` in
`schemas/layouts.json` recognise full causal LMs, MTP/NextN heads, Medusa, MLP speculators,
DFlash and DSpark drafts, and P-EAGLE drafts (a draft, but one some commands cannot handle); they
are tried before the producer layouts. `looks_like_draft` answers the opposite question for a
`--target` config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eagle_convert.draft import schemas
from eagle_convert.draft.layout import Facts, _match
from eagle_convert.errors import NotADraftError
from eagle_convert.vllm_model import all_releases, read_config

# What a swapped pair of arguments looks like on every command line (DRAFT first, then --target TARGET).
SWAP = "did you swap DRAFT and --target?"
# Extra evidence shown with a match: the shapes of these tensors (a target's are [vocab, hidden]).
_SHOW_SUFFIXES = ("embed_tokens.weight", "lm_head.weight")


@dataclass(frozen=True)
class DraftKind:
    """A `not_drafts` rule that matched: what the checkpoint is, why we think so, what to do."""

    id: str
    what: str
    hint: str
    reasons: tuple[str, ...]
    unsupported_by: tuple[str, ...] = ()

    @property
    def is_draft(self) -> bool:
        """True for drafts that only some commands refuse (P-EAGLE)."""
        return bool(self.unsupported_by)

    def message(self, where: str, command: str | None = None, swap: str = SWAP) -> str:
        hint = self.hint.replace("{command}", command or "this command").replace("{swap}", swap)
        if self.is_draft:
            return f"{where}: {self.what} ({'; '.join(self.reasons)}): {hint}"
        return f"{where}: this looks like {self.what}, not an EAGLE-3 draft ({'; '.join(self.reasons)}): {hint}"


def detect_kind(
    keys: Iterable[str], config: Mapping[str, Any], *, shapes: Mapping[str, tuple[int, ...]] | None = None
) -> DraftKind | None:
    """The first `not_drafts` rule whose every condition holds, or None for an ordinary EAGLE-3 draft."""
    facts = Facts(list(keys), config)
    for rule in schemas.load_schema("layouts.json")["not_drafts"]:
        reasons = _match(rule, facts)
        if reasons is None:
            continue
        extra = [f"{k} {list(s)}" for k, s in sorted((shapes or {}).items()) if k.endswith(_SHOW_SUFFIXES)][:2]
        reasons = tuple(
            r for r in reasons if not any(r == f"has {k!r}" for k in shapes or {} if k.endswith(_SHOW_SUFFIXES))
        )
        archs = config.get("architectures")
        if rule["id"] == "causal-lm" and isinstance(archs, list) and archs and isinstance(archs[0], str):
            extra.append(f"architectures {archs[0]!r}")
        return DraftKind(
            rule["id"], rule["what"], rule["hint"], (*reasons, *extra), tuple(rule.get("unsupported_by", ()))
        )
    return None


def ensure_draft(ckpt: Any, command: str | None = None, *, swap: str = SWAP) -> None:
    """Raise NotADraftError (one line, exit 1) unless `ckpt` (a `Checkpoint`) is a draft `command` handles.

    `command` None: only checkpoints that are no draft at all are refused (what describe needs).
    """
    kind = detect_kind(ckpt.tensors, ckpt.config, shapes={n: t.shape for n, t in ckpt.tensors.items()})
    if kind is None or (kind.is_draft and command not in kind.unsupported_by):
        return
    raise NotADraftError(kind.message(ckpt.description, command, swap), kind=kind.id)


def ensure_target_config(config: Mapping[str, Any], where: str, *, swap: str = SWAP) -> None:
    """Raise NotADraftError when the config given as the target's is an EAGLE-3 draft's."""
    if why := looks_like_draft(config):
        raise NotADraftError(
            f"{where}: this looks like an EAGLE-3 draft, not the target model ({why}): {swap}", kind="eagle3-draft"
        )


def looks_like_draft(config: Mapping[str, Any]) -> str | None:
    """Why a config meant as the *target's* is an EAGLE-3 draft's (None when it is not)."""
    if "speculators_model_type" in config:
        return f"speculators_model_type is {config['speculators_model_type']!r}"
    # Any known release's registry: whether a folder is a draft does not depend on the vLLM installed.
    for view in (read_config(dict(config), rel) for rel in reversed(all_releases())):
        if view.draft_class is not None and view.architecture == (config.get("architectures") or [None])[0]:
            return f"architectures[0] {view.architecture!r} is vLLM's EAGLE-3 draft class {view.draft_class.name}"
    for name in ("draft_vocab_size", "eagle_aux_hidden_state_layer_ids", "eagle_config", "target_hidden_size"):
        if name in config:
            return f"config has {name!r}"
    return None
