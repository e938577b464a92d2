"""Rows of a 2-D tensor by byte range: a sample of an embedding or lm_head without reading the rest.

`validate --target` compares the draft's embedding and lm_head with the target's; for an 8B target
those are 1 GiB each and may sit on the hub. `RowReader.read` fetches only the asked rows, merging
rows that lie close together into one range read (one HTTP request on the hub) as long as the bytes
skipped between them stay small; `RowReader.blocks` streams every row in bounded blocks (--deep).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from eagle_convert.io.safetensors_header import TensorInfo
from eagle_convert.io.source import Source
from eagle_convert.io.tensordata import decode, tensor_bytes

if TYPE_CHECKING:
    import numpy as np

#: Rows closer than this many bytes apart are read in one range (cheaper than another request).
MERGE_GAP_BYTES = 64 << 10
#: Bytes per block when every row is streamed.
BLOCK_BYTES = 32 << 20


class RowReader:
    """Reads rows of one [rows, cols] tensor and counts the bytes and range reads it needed."""

    def __init__(self, source: Source, info: TensorInfo) -> None:
        if len(info.shape) != 2:
            raise ValueError(f"{info.name}: expected a 2-D tensor, got shape {list(info.shape)}")
        self.source, self.info = source, info
        self.rows, self.cols = info.shape
        self.row_bytes = info.nbytes // self.rows if self.rows else 0
        self.bytes_read = 0
        self.reads = 0

    def span(self, first: int, count: int) -> np.ndarray:
        """Rows first..first+count-1 as float32, in one range read."""
        raw = tensor_bytes(self.source, self.info, first * self.row_bytes, count * self.row_bytes)
        self.bytes_read += len(raw)
        self.reads += 1
        return decode(raw, self.info.dtype, (count, self.cols))

    def read(self, ids: Sequence[int]) -> np.ndarray:
        """Rows `ids` (in that order) as float32 [len(ids), cols]; close rows share one range read."""
        import numpy as np

        wanted = sorted({int(i) for i in ids})
        if any(i < 0 or i >= self.rows for i in wanted[:1] + wanted[-1:]):
            raise ValueError(f"{self.info.name}: row ids outside [0, {self.rows})")
        gap = MERGE_GAP_BYTES // self.row_bytes if self.row_bytes else 0
        got: dict[int, np.ndarray] = {}
        start = 0
        while start < len(wanted):
            end = start
            while end + 1 < len(wanted) and wanted[end + 1] - wanted[end] - 1 <= gap:
                end += 1
            first, last = wanted[start], wanted[end]
            block = self.span(first, last - first + 1)
            for i in wanted[start : end + 1]:
                got[i] = block[i - first]
            start = end + 1
        out = np.empty((len(ids), self.cols), dtype=np.float32)
        for k, i in enumerate(ids):
            out[k] = got[int(i)]
        return out

    def blocks(self, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float32 block) over every row, `block_bytes` of the file at a time."""
        per = max(1, block_bytes // max(self.row_bytes, 1))
        for first in range(0, self.rows, per):
            yield first, self.span(first, min(per, self.rows - first))
