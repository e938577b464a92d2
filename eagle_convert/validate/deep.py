"""`validate --deep`: read every tensor once, in bounded chunks, and check its values.

Headers say nothing about values: a NaN, an all-zero projection lost in export or a norm weight
scaled twice only show up in the data. The scan must run at the speed of reading the file (the
target is >= 80% of `cat > /dev/null`; see benchmarks/scale_bench.py), so:

- bytes go into one reused buffer of `chunk_bytes` (512 KiB: it stays in the CPU cache between the
  read and the checks; a fresh `bytes` per chunk costs page faults and memory);
- matrices (the bulk of a draft) are checked on their bit patterns, two read-only reductions per
  chunk: the largest magnitude of the non-negative values (max of the signed view) and of the
  negative ones (max of the unsigned view). IEEE magnitudes order like their bit patterns, so
  that gives max |w|, "all zero" (max magnitude 0) and "no NaN/Inf" (below the all-ones exponent)
  without decoding; only a chunk that holds a NaN or Inf is decoded, to count them;
- 1-D tensors (norms, biases: a few KiB) get full statistics (mean |w|, ones, negatives), which
  W803/I804 need.

Memory stays bounded by `chunk_bytes` whatever the checkpoint size; numpy does the work, torch is
not needed (a `.bin` is read by byte range too).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

from eagle_convert.draft.checkpoint import Checkpoint
from eagle_convert.errors import CheckpointReadError
from eagle_convert.io.safetensors_header import DTYPE_BYTES, TensorInfo
from eagle_convert.io.source import LocalSource
from eagle_convert.io.tensordata import decode
from eagle_convert.validate.findings import Finding, finding

CHUNK_BYTES = 512 << 10
FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}
NORM_MEAN_ABS = (1e-2, 50.0)  # plausible mean |w| of a trained RMSNorm weight
EXTREME = 1e4  # |w| beyond this overflows fp16 activations
# dtype -> (signed view, unsigned view, magnitude bits at and above which a value is Inf/NaN)
_BITS = {"BF16": ("<i2", "<u2", 0x7F80), "F16": ("<i2", "<u2", 0x7C00),
         "F32": ("<i4", "<u4", 0x7F800000), "F64": ("<i8", "<u8", 0x7FF0000000000000)}

Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, current tensor)


@dataclass
class TensorStats:
    """What one pass over a tensor's values found. `ones`, `negatives` and `abs_sum` are counted
    for 1-D tensors only (None for matrices, which are checked on their bit patterns)."""

    name: str
    dtype: str
    numel: int
    nonfinite: int = 0
    all_zero: bool = True
    max_abs: float = 0.0
    ones: int | None = None
    negatives: int | None = None
    abs_sum: float | None = None

    @property
    def mean_abs(self) -> float:
        finite = self.numel - self.nonfinite
        return self.abs_sum / finite if finite and self.abs_sum is not None else math.nan


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


class _Reader:
    """Fills one reused buffer with consecutive pieces of a tensor: a local file through one open
    descriptor and `os.preadv`, any other source through `read_range`."""

    def __init__(self, ckpt: Checkpoint, chunk_bytes: int) -> None:
        self.ckpt = ckpt
        self.step = max(chunk_bytes - chunk_bytes % 8, 8)
        self.buf = bytearray(self.step)
        self.view = memoryview(self.buf)
        self.fds: dict[str, int] = {}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def chunks(self, info: TensorInfo) -> Iterator[memoryview]:
        source = self.ckpt.source
        for pos in range(0, info.nbytes, self.step):
            n = min(self.step, info.nbytes - pos)
            if isinstance(source, LocalSource):
                self._pread(source, info, info.offset + pos, self.view[:n])
            else:
                self.view[:n] = source.read_range(info.file, info.offset + pos, n)
            yield self.view[:n]

    def _pread(self, source: LocalSource, info: TensorInfo, start: int, view: memoryview) -> None:
        done = 0
        fd = self.fds.get(info.file)
        try:
            if fd is None:
                fd = self.fds[info.file] = os.open(source.local_path(info.file), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            while done < len(view):
                got = os.preadv(fd, [view[done:]], start + done)
                if got == 0:
                    break
                done += got
        except OSError as exc:
            raise CheckpointReadError(f"{source.local_path(info.file)}: cannot read ({exc.strerror})") from exc
        if done != len(view):
            raise CheckpointReadError(f"{source.local_path(info.file)}: truncated (wanted bytes {start}.."
                                      f"{start + len(view)}, file has {start + done})",
                                      hint="re-download or re-export the file")


def scan_tensor(ckpt: Checkpoint, info: TensorInfo, *, chunk_bytes: int = CHUNK_BYTES,
                on_bytes: Callable[[int], None] | None = None, reader: _Reader | None = None) -> TensorStats:
    own = reader is None
    reader = reader or _Reader(ckpt, chunk_bytes)
    try:
        return _scan(reader, info, on_bytes)
    finally:
        if own:
            reader.close()


def _scan(reader: _Reader, info: TensorInfo, on_bytes: Callable[[int], None] | None) -> TensorStats:
    import numpy as np

    stats = TensorStats(info.name, info.dtype, info.numel)
    full = len(info.shape) <= 1 and info.dtype in FLOAT_DTYPES
    if full:
        stats.ones, stats.negatives, stats.abs_sum = 0, 0, 0.0
    bits = _BITS.get(info.dtype) if not full else None
    max_bits = 0
    if bits is not None:
        signed, unsigned, inf_bits = bits
        size = DTYPE_BYTES[info.dtype]
        sign = 1 << (8 * size - 1)
        whole_s, whole_u = np.frombuffer(reader.buf, dtype=signed), np.frombuffer(reader.buf, dtype=unsigned)
    for raw in reader.chunks(info):
        if bits is not None:
            k = len(raw) // size
            top = int(whole_s[:k].max())
            mag = max(top, int(whole_u[:k].max()) - sign, 0)
            if mag < inf_bits:
                max_bits = max(max_bits, mag)
            else:  # a NaN or Inf somewhere in this chunk: decode it to count them
                _float_chunk(stats, decode(bytes(raw), info.dtype, (len(raw) // DTYPE_BYTES[info.dtype],)))
        elif info.dtype in FLOAT_DTYPES:
            _float_chunk(stats, decode(bytes(raw), info.dtype, (len(raw) // DTYPE_BYTES[info.dtype],)))
        elif stats.all_zero and np.frombuffer(raw, dtype=np.uint8).any():
            stats.all_zero = False
        if on_bytes:
            on_bytes(len(raw))
    if max_bits:
        stats.all_zero = False
        stats.max_abs = max(stats.max_abs, _magnitude(max_bits, info.dtype))
    return stats


def _magnitude(bits: int, dtype: str) -> float:
    """The value of a non-negative float given by its bit pattern."""
    import numpy as np

    if dtype == "BF16":
        return float(np.array([bits << 16], dtype="<u4").view(np.float32)[0])
    return float(np.array([bits], dtype=_BITS[dtype][1]).view({"F16": "<f2", "F32": "<f4", "F64": "<f8"}[dtype])[0])


def _float_chunk(stats: TensorStats, arr) -> None:  # noqa: ANN001 - a numpy array
    import numpy as np

    finite = np.isfinite(arr)
    bad = int(arr.size - np.count_nonzero(finite))
    stats.nonfinite += bad
    vals = arr[finite] if bad else arr
    absv = np.abs(vals)
    if absv.size:
        stats.max_abs = max(stats.max_abs, float(absv.max()))
    if bad or np.count_nonzero(vals):
        stats.all_zero = False
    if stats.abs_sum is not None:
        stats.abs_sum += float(absv.sum(dtype=np.float64))
        stats.ones = (stats.ones or 0) + int(np.count_nonzero(vals == 1.0))
        stats.negatives = (stats.negatives or 0) + int(np.count_nonzero(vals < 0))


def scan(ckpt: Checkpoint, *, chunk_bytes: int = CHUNK_BYTES, progress: Progress | None = None) -> DeepSummary:
    """Stats for every tensor, reading each byte once in chunks of at most `chunk_bytes`."""
    import time

    t0 = time.perf_counter()
    total = ckpt.total_bytes
    done = 0
    stats = []
    reader = _Reader(ckpt, chunk_bytes)
    try:
        for info in sorted(ckpt.tensors.values(), key=lambda t: (t.file, t.offset)):
            def tick(n: int, name: str = info.name) -> None:
                nonlocal done
                done += n
                if progress:
                    progress(done, total, name)

            stats.append(_scan(reader, info, tick))
    finally:
        reader.close()
    return DeepSummary(len(stats), done, round(time.perf_counter() - t0, 3), reader.step, stats)


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
        if s.all_zero and kind != "bias":
            out.append(finding("E802", f"{s.name}: all {s.numel} values are zero", tensor=s.name))
            continue
        if kind == "norm" and s.abs_sum is not None and s.negatives is not None:
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
