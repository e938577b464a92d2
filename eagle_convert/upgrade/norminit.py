"""fc_norm initial values (ones, or `upgrade --init calibrated`'s), and their bytes.

Pure: the values are computed elsewhere (`finetune.calibrate` measures them on the target with
torch) and carried by the plan as the added tensors' data. Ones, the default, are `io.ONE`'s bytes:
no numpy on an upgrade's path (~0.1 s of its start-up).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle_convert.errors import UsageError
from eagle_convert.io import ONE, encode

FLOAT_DTYPES = tuple(ONE)  # the dtypes fc_norm weights can be written in


@dataclass(frozen=True)
class NormInit:
    """Values for the new `fc_norm.{i}.weight` instead of ones: one sequence per aux state, of
    length 1 (broadcast over the target hidden size) or target_hidden_size. `record` goes into the
    provenance block as `fc_norm_init` (how the values were obtained)."""

    method: str
    values: tuple[tuple[float, ...], ...]
    record: dict[str, Any] = field(default_factory=dict)

    def summary(self, i: int) -> str:
        v = self.values[i]
        return f"{v[0]:.6g}" if len(v) == 1 else f"mean {sum(v) / len(v):.6g}, range {min(v):.6g}..{max(v):.6g}"


def norm_bytes(init: NormInit | None, i: int, num_aux: int, ht: int, dtype: str) -> bytes:
    """The bytes of fc_norm.{i}.weight: ones, or `init`'s values broadcast to [ht]."""
    if init is None:
        return ONE[dtype] * ht if dtype in ONE else encode([1.0] * ht, dtype)
    if len(init.values) != num_aux or any(len(v) not in (1, ht) for v in init.values):
        raise UsageError(
            f"fc_norm init {init.method!r} gives {[len(v) for v in init.values]} values per aux state; "
            f"the draft needs {num_aux} of length 1 or {ht}"
        )
    v = init.values[i]
    return encode(list(v) * ht if len(v) == 1 else v, dtype)
