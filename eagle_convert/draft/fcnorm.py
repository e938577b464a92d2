"""Whether a draft's `fc_norm.{i}.weight` values were ever trained, and what its records claim.

`upgrade` (and converters such as `speculators convert`, whose missing tensors vLLM fills with 1.0)
start fc_norm at exactly 1.0: the draft then computes what it was upgraded to compute, but its
acceptance sits below the EAGLE-3 source's until the values are calibrated (`upgrade --init
calibrated`) or fine-tuned. Reading the values costs hidden_size x num_aux floats, nothing else.
What the draft claims comes from eagle-convert's provenance chain (`_eagle_convert` in config.json,
newest entry first), else from the words of its model card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from eagle_convert.draft.card import CARD_FILE, provenance_chain
from eagle_convert.draft.checkpoint import Checkpoint
from eagle_convert.draft.layout import canonical_name
from eagle_convert.io import DECODABLE, ONE, read_array, tensor_bytes
from eagle_convert.jsonable import Jsonable

Values = Literal["identity", "calibrated", "trained"]
# What the records say was done to fc_norm last: "identity" (an upgrade wrote ones), "calibrated"
# (`upgrade --init calibrated`), "fine-tuned" (`finetune`, or a card that says so), None: nothing.
Claim = Literal["identity", "calibrated", "fine-tuned"] | None

_FC_NORM = re.compile(r"^fc_norm\.(\d+)\.weight$")
# A model card's words for values that were fitted (fine-tuned, trained, calibrated), case-insensitive.
_CARD_CLAIMS: tuple[tuple[re.Pattern[str], Claim], ...] = (
    (re.compile(r"\bfine[- ]?tun\w*|\bTTT\b|\btrained\b", re.IGNORECASE), "fine-tuned"),
    (re.compile(r"\bcalibrat\w*", re.IGNORECASE), "calibrated"),
)
_CARD_MAX_BYTES = 1 << 20  # a card larger than this is not read (its words do not change the values)


@dataclass(frozen=True)
class FcNormState(Jsonable):
    """The fc_norm tensors' values (identity: every one exactly 1.0) and what the records claim."""

    values: Values
    tensors: tuple[str, ...]  # on-disk names, in aux order
    identity: tuple[str, ...]  # those exactly 1.0 everywhere
    claim: Claim
    claim_source: str  # where the claim was read ("provenance: upgrade ...", "README.md", "")

    @property
    def untrained(self) -> bool:
        return bool(self.identity)

    def line(self) -> str:
        """What `inspect` shows, e.g. `identity (untrained)` or `calibrated (provenance: ...)`."""
        head: str = "identity (untrained)" if self.values == "identity" else self.values
        if self.identity and self.values != "identity":
            head += f"; {len(self.identity)} of {len(self.tensors)} exactly 1.0"
        return head + (f" [{self.claim_source}]" if self.claim_source else "")


def fc_norm_state(ckpt: Checkpoint) -> FcNormState | None:
    """The fc_norm values and claims of `ckpt`; None when it has no readable fc_norm tensor."""
    found = sorted(
        ((int(m.group(1)), name) for name in ckpt.tensors if (m := _FC_NORM.match(canonical_name(name)))),
    )
    names = tuple(name for _, name in found if ckpt.tensors[name].dtype in DECODABLE)
    if not names:
        return None
    identity = tuple(n for n in names if _all_ones(ckpt, n))
    claim, source = record_claim(ckpt)
    if len(identity) == len(names):
        values: Values = "identity"
    else:
        values = "calibrated" if claim == "calibrated" or _constant_each(ckpt, names) else "trained"
    return FcNormState(values, names, identity, claim, source)


def record_claim(ckpt: Checkpoint) -> tuple[Claim, str]:
    """What eagle-convert's newest provenance entry (else the model card) says fc_norm holds."""
    chain = provenance_chain(ckpt.config)
    if chain:
        newest = chain[0]
        op = str(newest.get("operation", ""))
        if op.startswith("finetune"):
            return "fine-tuned", f"provenance: {op}"
        if op.startswith("upgrade"):
            init = str(newest.get("added_init", "ones"))
            claim: Claim = "calibrated" if init == "calibrated" else "identity" if init == "ones" else None
            return claim, f"provenance: {op}, fc_norm init {init}"
        return None, f"provenance: {op or 'an unnamed operation'}"
    text = _card_text(ckpt)
    for pattern, said in _CARD_CLAIMS:
        if text and (m := pattern.search(text)):
            return said, f"{CARD_FILE} says {m.group(0)!r}"
    return None, ""


def _all_ones(ckpt: Checkpoint, name: str) -> bool:
    info = ckpt.tensors[name]
    if one := ONE.get(info.dtype):  # compare bits: 1.0 has one pattern, and an upgrade imports no numpy
        return info.nbytes > 0 and tensor_bytes(ckpt.source, info) == one * (info.nbytes // len(one))
    arr = read_array(ckpt, name)
    return bool(arr.size) and bool((arr == 1.0).all())


def _constant_each(ckpt: Checkpoint, names: tuple[str, ...]) -> bool:
    """Calibration writes one value per aux state (broadcast); training moves every entry."""
    for n in names:
        arr = read_array(ckpt, n)
        if not arr.size or not (arr == arr.flat[0]).all():
            return False
    return True


def _card_text(ckpt: Checkpoint) -> str:
    try:
        if CARD_FILE not in ckpt.source.list_files():
            return ""
        size = ckpt.source.file_size(CARD_FILE)
        if size > _CARD_MAX_BYTES:
            return ""
        return ckpt.source.read_range(CARD_FILE, 0, size).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""
