"""`validate --deep`: read every tensor once, in bounded chunks, and check its values.

Headers say nothing about values: a NaN, an all-zero projection lost in export or a norm weight
scaled twice only show up in the data. Memory stays bounded by `chunk_bytes` (decoded to float32,
so about 3x that at peak) whatever the checkpoint size; numpy does the work, torch is not needed
(a `.bin` is read by byte range too).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from eagle_convert.draft.checkpoint import Checkpoint
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.io.safetensors_header import DTYPE_BYTES, TensorInfo
from eagle_convert.io.tensordata import decode, tensor_bytes

CHUNK_BYTES = 32 << 20
FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}
NORM_MEAN_ABS = (1e-2, 50.0)  # plausible mean |w| of a trained RMSNorm weight
EXTREME = 1e4  # |w| beyond this overflows fp16 activations

Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, current tensor)


@dataclass
class TensorStats:
    """What one pass over a tensor's values found."""

    name: str
    dtype: str
    numel: int
    nonfinite: int = 0
    zeros: int = 0
    ones: int = 0
    negatives: int = 0
    abs_sum: float = 0.0
    max_abs: float = 0.0

    @property
    def mean_abs(self) -> float:
        finite = self.numel - self.nonfinite
        return self.abs_sum / finite if finite else math.nan


@dataclass
class DeepSummary:
    tensors: int
    bytes_read: int
    seconds: float
    chunk_bytes: int
    stats: list[TensorStats] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("stats")
        return data


def _chunks(ckpt: Checkpoint, info: TensorInfo, chunk_bytes: int):
    step = max(chunk_bytes - chunk_bytes % 8, 8)
    for pos in range(0, info.nbytes, step):
        yield tensor_bytes(ckpt.source, info, pos, min(step, info.nbytes - pos))


def scan_tensor(ckpt: Checkpoint, info: TensorInfo, *, chunk_bytes: int = CHUNK_BYTES,
                on_bytes: Callable[[int], None] | None = None) -> TensorStats:
    import numpy as np

    stats = TensorStats(info.name, info.dtype, info.numel)
    size = DTYPE_BYTES[info.dtype]
    for raw in _chunks(ckpt, info, chunk_bytes):
        if info.dtype in FLOAT_DTYPES:
            arr = decode(raw, info.dtype, (len(raw) // size,))
            finite = np.isfinite(arr)
            stats.nonfinite += int(arr.size - np.count_nonzero(finite))
            vals = arr[finite] if stats.nonfinite else arr
            absv = np.abs(vals, dtype=np.float64) if vals.dtype == np.float64 else np.abs(vals)
            stats.abs_sum += float(absv.sum(dtype=np.float64))
            stats.max_abs = max(stats.max_abs, float(absv.max()) if absv.size else 0.0)
            stats.zeros += int(vals.size - np.count_nonzero(vals))
            stats.ones += int(np.count_nonzero(vals == 1.0))
            stats.negatives += int(np.count_nonzero(vals < 0))
        else:
            arr = decode(raw, info.dtype, (len(raw) // size,))
            stats.zeros += int(arr.size - np.count_nonzero(arr))
        if on_bytes:
            on_bytes(len(raw))
    return stats


def scan(ckpt: Checkpoint, *, chunk_bytes: int = CHUNK_BYTES, progress: Progress | None = None) -> DeepSummary:
    """Stats for every tensor, reading each byte once in chunks of at most `chunk_bytes`."""
    import time

    t0 = time.perf_counter()
    total = ckpt.total_bytes
    done = 0
    stats = []
    for info in sorted(ckpt.tensors.values(), key=lambda t: (t.file, t.offset)):
        def tick(n: int, name: str = info.name) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, total, name)

        stats.append(scan_tensor(ckpt, info, chunk_bytes=chunk_bytes, on_bytes=tick))
    return DeepSummary(len(stats), done, round(time.perf_counter() - t0, 3), chunk_bytes, stats)


def _kind(name: str, kinds: dict[str, str]) -> str:
    if name in kinds:
        return kinds[name]
    if name.endswith(("norm.weight", "layernorm.weight")):
        return "norm"
    return "index" if name in ("d2t", "t2d") else "linear"


def findings_from(summary: DeepSummary, kinds: dict[str, str]) -> list[Finding]:
    """E801/E802/W803/I804/W805 from the stats; `kinds` maps on-disk names to tensorspec kinds."""
    out: list[Finding] = []
    for s in summary.stats:
        kind = _kind(s.name, kinds)
        if s.numel == 0 or kind in ("index", "mask"):
            continue
        if s.nonfinite:
            out.append(finding("E801", f"{s.name}: {s.nonfinite} of {s.numel} values are NaN or Inf", tensor=s.name))
        if s.dtype not in FLOAT_DTYPES:
            continue
        if s.zeros == s.numel and kind != "bias":
            out.append(finding("E802", f"{s.name}: all {s.numel} values are zero", tensor=s.name))
            continue
        if kind == "norm":
            if s.ones == s.numel:
                out.append(finding("I804", f"{s.name}: every value is exactly 1.0 (an untrained norm)", tensor=s.name))
            elif not NORM_MEAN_ABS[0] <= s.mean_abs <= NORM_MEAN_ABS[1] or s.negatives * 2 > s.numel:
                neg = f", {100 * s.negatives / s.numel:.0f}% negative" if s.negatives else ""
                plausible = f"{NORM_MEAN_ABS[0]:g}..{NORM_MEAN_ABS[1]:g}"
                out.append(finding("W803", f"{s.name}: mean |w| {s.mean_abs:.3g}, max |w| {s.max_abs:.3g}{neg}; "
                                           f"trained RMSNorm weights sit roughly in {plausible}", tensor=s.name))
        elif s.max_abs > EXTREME:
            out.append(finding("W805", f"{s.name}: max |w| is {s.max_abs:.3g}", tensor=s.name))
    return out
