"""`validate --deep`: read every tensor once, in bounded chunks, and check its values.

Headers say nothing about values: a NaN, an all-zero projection lost in export or a norm weight
scaled twice only show up in the data. The scan must run at the speed of reading the file (the
target is >= 80% of `cat > /dev/null`; see benchmarks/scale_bench.py), so:

- a local file is mapped in 8 MiB read-only windows and checked in place, `chunk_bytes` (512 KiB,
  cache-sized) at a time: no copy out of the page cache (other sources: one reused buffer);
- matrices (the bulk of a draft) are checked on their bit patterns, two read-only reductions per
  chunk: the largest magnitude of the non-negative values (max of the signed view) and of the
  negative ones (max of the unsigned view). IEEE magnitudes order like their bit patterns, so
  that gives max |w|, "all zero" (max magnitude 0) and "no NaN/Inf" (below the all-ones exponent)
  without decoding; only a chunk that holds a NaN or Inf is decoded, to count them;
- 1-D tensors (norms, biases: a few KiB) get full statistics (mean |w|, ones, negatives), which
  W803/I804 need.

Memory stays bounded by one window (mapped pages count in the resident set) whatever the
checkpoint size; numpy does the work, torch is not needed (a `.bin` is read by byte range too).
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from eagle_convert.draft import Checkpoint
from eagle_convert.errors import CheckpointReadError
from eagle_convert.io import DTYPE_BYTES, LocalSource, TensorInfo, decode
from eagle_convert.jsonable import Jsonable, key
from eagle_convert.validate.findings import Finding, finding

CHUNK_BYTES = 512 << 10
WINDOW_BYTES = 8 << 20  # mapped at a time (local files): what the scan adds to the resident set
FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}
NORM_MEAN_ABS = (1e-2, 50.0)  # plausible mean |w| of a trained RMSNorm weight
EXTREME = 1e4  # |w| beyond this overflows fp16 activations
# dtype -> (signed view, unsigned view, magnitude bits at and above which a value is Inf/NaN)
_BITS = {
    "BF16": ("<i2", "<u2", 0x7F80),
    "F16": ("<i2", "<u2", 0x7C00),
    "F32": ("<i4", "<u4", 0x7F800000),
    "F64": ("<i8", "<u8", 0x7FF0000000000000),
}

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
class DeepSummary(Jsonable):
    tensors: int
    bytes_read: int
    seconds: float
    chunk_bytes: int
    stats: list[TensorStats] = field(default_factory=list, repr=False, metadata=key(dump=False))


class _Reader:
    """Consecutive pieces of a tensor, at most `step` bytes each. A local file is mapped in bounded
    read-only windows (`WINDOW_BYTES`) and the pieces are views of the page cache itself: no copy,
    which measured as fast as `cat` (a `preadv` into a buffer first reached ~80% of it). Any other
    source fills one reused buffer through `read_range`."""

    def __init__(self, ckpt: Checkpoint, chunk_bytes: int) -> None:
        self.ckpt = ckpt
        self.step = max(chunk_bytes - chunk_bytes % 8, 8)
        self.window = max(self.step, WINDOW_BYTES - WINDOW_BYTES % self.step)
        self.buf = bytearray(self.step) if not isinstance(ckpt.source, LocalSource) else bytearray(0)
        self.view = memoryview(self.buf)
        self.fds: dict[str, int] = {}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def chunks(self, info: TensorInfo) -> Iterator[memoryview]:
        source = self.ckpt.source
        if isinstance(source, LocalSource):
            yield from self._mapped(source, info)
            return
        for pos in range(0, info.nbytes, self.step):
            n = min(self.step, info.nbytes - pos)
            self.view[:n] = source.read_range(info.file, info.offset + pos, n)
            yield self.view[:n]

    def _mapped(self, source: LocalSource, info: TensorInfo) -> Iterator[memoryview]:
        path = source.local_path(info.file)
        try:
            fd = self.fds.get(info.file)
            if fd is None:
                fd = self.fds[info.file] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            size = os.fstat(fd).st_size
        except OSError as exc:
            raise CheckpointReadError(f"{path}: cannot read ({exc.strerror})") from exc
        end = info.offset + info.nbytes
        if end > size:  # checked first: touching a mapped page beyond the end of a file raises SIGBUS
            raise CheckpointReadError(
                f"{path}: truncated (wanted bytes {info.offset}..{end}, file has {size})",
                hint="re-download or re-export the file",
            )
        pos = info.offset
        while pos < end:
            n = min(self.window, end - pos)
            base = pos - pos % mmap.ALLOCATIONGRANULARITY
            try:
                m = mmap.mmap(fd, pos - base + n, access=mmap.ACCESS_READ, offset=base)
            except (OSError, ValueError) as exc:
                raise CheckpointReadError(f"{path}: cannot map bytes {pos}..{pos + n} ({exc})") from exc
            if hasattr(m, "madvise"):
                m.madvise(mmap.MADV_SEQUENTIAL)  # read ahead aggressively where the cache is cold
            view = memoryview(m)
            try:
                for a in range(pos - base, pos - base + n, self.step):
                    piece = view[a : min(a + self.step, pos - base + n)]
                    yield piece
                    piece.release()
            finally:
                try:
                    view.release()
                    m.close()
                except BufferError:  # a piece still referenced (the scan was interrupted): GC unmaps it
                    pass
            pos += n


def scan_tensor(
    ckpt: Checkpoint,
    info: TensorInfo,
    *,
    chunk_bytes: int = CHUNK_BYTES,
) -> TensorStats:
    """One tensor's stats on its own reader (`deep_scan` shares one reader over every tensor)."""
    reader = _Reader(ckpt, chunk_bytes)
    try:
        return _scan(reader, info, None)
    finally:
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
        sign = 1 << (8 * DTYPE_BYTES[info.dtype] - 1)
    for raw in reader.chunks(info):
        if bits is not None:
            top = int(np.frombuffer(raw, dtype=signed).max())
            mag = max(top, int(np.frombuffer(raw, dtype=unsigned).max()) - sign, 0)
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
                out.append(
                    finding(
                        "W803",
                        f"{s.name}: mean |w| {s.mean_abs:.3g}, max |w| {s.max_abs:.3g}{neg}; "
                        f"trained RMSNorm weights sit roughly in {plausible}",
                        tensor=s.name,
                    )
                )
        elif s.max_abs > EXTREME:
            out.append(finding("W805", f"{s.name}: max |w| is {s.max_abs:.3g}", tensor=s.name))
    return out
