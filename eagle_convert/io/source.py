"""Where checkpoint bytes come from: a local folder, a single local file, or (in `hub.py`) a hub repo.

Everything that reads a checkpoint goes through a `Source`, so header parsing, inspection and
validation work unchanged on local and remote checkpoints, reading only the byte ranges they need.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Protocol

from eagle_convert.errors import CheckpointNotFoundError, CheckpointReadError, ConfigError, EagleConvertError
from eagle_convert.io.bounded import MAX_CONFIG_BYTES, JsonLimits, open_regular, parse_json, regular_size
from eagle_convert.io.localpath import missing_path_error

#: config.json and other small JSON files: Python's json.load rules (what transformers and vLLM
#: use), capped in size and depth.
CONFIG_LIMITS = JsonLimits(max_bytes=MAX_CONFIG_BYTES, what="config")


class Source(Protocol):
    """Read-only access to the files of one checkpoint.

    A source may also offer `readinto(name, start, buffer)` (`LocalSource` does): `io.tensordata`
    then reads large tensors straight into their buffer instead of through `read_range`'s bytes.
    """

    @property
    def description(self) -> str:
        """How to name this checkpoint to a user (path or `repo@rev`)."""
        ...

    def list_files(self) -> list[str]:
        """File names relative to the checkpoint root, sorted."""
        ...

    def file_size(self, name: str) -> int: ...

    def read_range(self, name: str, start: int, length: int) -> bytes:
        """Exactly `length` bytes at `start`, or CheckpointReadError if the file is shorter."""
        ...

    def local_path(self, name: str) -> Path:
        """A local path holding the file (downloads it for remote sources)."""
        ...


def where(source: Source, name: str) -> str:
    """How to name one file of a source in a message (`dir/config.json`, or the single file itself)."""
    root = getattr(source, "root", None)
    if isinstance(root, Path):
        return str(root / name) if str(root) != "." else name
    return f"{source.description}/{name}"


def read_json(
    source: Source, name: str, *, limits: JsonLimits = CONFIG_LIMITS, error: type[EagleConvertError] = ConfigError
) -> dict[str, Any]:
    """Parse a small JSON file from a source (size-capped before reading), naming the file in every error."""
    size = source.file_size(name)
    if size > limits.max_bytes:
        raise error(
            f"{where(source, name)}: {size} bytes, more than the {limits.max_bytes >> 20} MiB a {limits.what} may have",
            hint="this is not a real one; replace it with the original file",
        )
    value = parse_json(source.read_range(name, 0, size), where(source, name), limits, error=error)
    if not isinstance(value, dict):
        raise error(f"{where(source, name)}: expected a JSON object at the top level")
    return value


class LocalSource:
    """A checkpoint folder, or a single weights file (with the folder's config.json if present)."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        try:
            path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CheckpointReadError(f"{path}: symbolic link loop", hint="point the link at a real file") from None
            raise missing_path_error(path) from None
        if path.is_dir():
            self.root = path
            self._only: set[str] | None = None
            self._display = str(path)
        else:
            self.root = path.parent
            self._only = {path.name}
            if _regular_or_link(self.root / "config.json"):
                self._only.add("config.json")
            self._display = str(path)
        self.single_file = None if path.is_dir() else path.name

    @property
    def description(self) -> str:
        return self._display

    def list_files(self) -> list[str]:
        if self._only is not None:
            return sorted(self._only)
        out: list[str] = []
        for dirpath, _dirnames, filenames in os.walk(self.root):
            rel = Path(dirpath).relative_to(self.root)
            if any(part.startswith(".") for part in rel.parts):
                continue
            out.extend(str(rel / f) if str(rel) != "." else f for f in filenames)
        return sorted(out)

    def _path(self, name: str) -> Path:
        if self._only is not None and name not in self._only:
            raise CheckpointNotFoundError(f"{self.root / name}: not part of this checkpoint")
        return self.root / name

    def file_size(self, name: str) -> int:
        return regular_size(self._path(name))

    def read_range(self, name: str, start: int, length: int) -> bytes:
        path = self._path(name)
        fd = open_regular(path)
        try:
            data = os.pread(fd, length, start) if length else b""
        except OSError as exc:
            raise CheckpointReadError(f"{path}: cannot read ({exc.strerror})") from exc
        finally:
            os.close(fd)
        if len(data) != length:
            raise CheckpointReadError(
                f"{path}: truncated (wanted bytes {start}..{start + length}, file has {start + len(data)})",
                hint="re-download or re-export the file",
            )
        return data

    def readinto(self, name: str, start: int, buffer: memoryview) -> None:
        """Fill `buffer` with the bytes at `start` (large tensors: no intermediate `bytes` copy)."""
        path, done = self._path(name), 0
        fd = open_regular(path)
        try:
            while done < len(buffer):
                n = os.preadv(fd, [buffer[done:]], start + done)
                if n == 0:
                    break
                done += n
        except OSError as exc:
            raise CheckpointReadError(f"{path}: cannot read ({exc.strerror})") from exc
        finally:
            os.close(fd)
        if done != len(buffer):
            raise CheckpointReadError(
                f"{path}: truncated (wanted bytes {start}..{start + len(buffer)}, file has {start + done})",
                hint="re-download or re-export the file",
            )

    def local_path(self, name: str) -> Path:
        return self._path(name)


def _regular_or_link(path: Path) -> bool:
    """True when `path` is a file or a link (a broken link or loop is reported when it is read)."""
    return path.is_file() or path.is_symlink()
