"""The one bounded, validating reader for what a checkpoint's small files hold: opens and JSON.

Checkpoints come from the internet, so nothing read from one may hang, grow without bound or
escape as a traceback. Every input file is opened here (`open_regular`): non-blocking, so a FIFO
named `config.json` cannot block, and refused unless it is a regular file (FIFOs, devices,
sockets, symlink loops get one line). Every JSON document (config.json, the shard index, a
safetensors header) is parsed here (`parse_json`): a size cap before reading, strict UTF-8 (a
byte-order mark is refused, as transformers' and vLLM's `json.load(open(...))` refuse it), a depth
cap, the 4,300-digit integer limit and lone surrogates turned into one `Error:` line.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert.errors import CheckpointNotFoundError, CheckpointReadError, EagleConvertError

#: Real draft and target configs are under 100 KB; a config above this is refused unread.
MAX_CONFIG_BYTES = 8 << 20
#: The largest published shard indexes (DeepSeek-V3's 91k tensors) are about 9 MB.
MAX_INDEX_BYTES = 32 << 20
#: Configs nest 3-4 levels; far deeper JSON is an attack on the recursive code that walks it.
MAX_JSON_DEPTH = 64

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def brief(value: object, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters: names and values from a file go into messages whole
    only when short (a 60 MB key must not become a 60 MB line)."""
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value if not isinstance(value, int) or value.bit_length() < 200 else "<huge integer>")
    else:
        text = (
            "<object>"
            if isinstance(value, dict)
            else "<list>"
            if isinstance(value, list)
            else f"<{type(value).__name__}>"
        )
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _os_error(path: Path | str, exc: OSError) -> EagleConvertError:
    """One line for an OSError raised while opening or reading an input file."""
    if exc.errno == errno.ENOENT:
        return CheckpointNotFoundError(f"{path}: no such file")
    if exc.errno == errno.ELOOP:
        return CheckpointReadError(f"{path}: symbolic link loop", hint="point the link at a real file")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return CheckpointReadError(f"{path}: permission denied", hint="check the file's permissions")
    if exc.errno == errno.EISDIR:
        return CheckpointReadError(f"{path}: is a directory, expected a file")
    return CheckpointReadError(f"{path}: cannot read ({exc.strerror or exc})")


def _refuse_kind(path: Path | str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise CheckpointReadError(f"{path}: is {kind}, expected a regular file", hint="replace it with the real file")


def open_regular(path: Path | str) -> int:
    """A read-only file descriptor of `path`, which must be a regular file (links followed).

    Opened with O_NONBLOCK so that a FIFO or device returns at once instead of blocking; the
    caller closes the descriptor. Raises `CheckpointNotFoundError` / `CheckpointReadError`.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        _refuse_kind(path, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def regular_size(path: Path | str) -> int:
    """Size of the regular file at `path` (links followed), refusing anything else in one line."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _os_error(path, exc) from None
    _refuse_kind(path, st.st_mode)
    return st.st_size


@dataclass(frozen=True, kw_only=True)
class JsonLimits:
    """What `parse_json` accepts beyond plain JSON syntax (one instance per kind of document)."""

    max_bytes: int
    what: str  # "config", "shard index", "safetensors header": named in messages
    allow_constants: bool = True  # NaN / Infinity, which Python's json.load accepts
    max_depth: int = MAX_JSON_DEPTH
    fix: str = "fix or regenerate the file"
    walk: bool = True  # check depth after parsing (the header reader checks its few free-form values)


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def depth_problem(value: Any, max_depth: int, depth: int = 1) -> str | None:
    """Why `value`, found at nesting `depth` of a parsed document, is unusable (see `parse_json`)."""
    if not isinstance(value, dict | list):
        return None
    return _depth_and_text(value, max_depth, depth)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth_and_text(value: Any, max_depth: int, depth: int = 1) -> str | None:
    """Why `value` (parsed JSON) is unusable: nested deeper than `max_depth` arrays/objects (the
    top-level object is depth 1, as serde_json counts) or a string that is not valid Unicode."""
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            strings, items = [node], []
        elif isinstance(node, dict):
            strings, items = list(node), list(node.values())
        elif isinstance(node, list):
            strings, items = [], node
        else:
            continue
        if not isinstance(node, str) and depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        for s in strings:
            if not s.isascii():
                try:
                    s.encode("utf-8")
                except UnicodeEncodeError:
                    return "a string holds a lone UTF-16 surrogate (not valid Unicode)"
        stack.extend((item, depth + 1) for item in items)
    return None


def parse_json(
    raw: bytes,
    where: str,
    limits: JsonLimits,
    *,
    error: type[EagleConvertError] = CheckpointReadError,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    parse_int: Callable[[str], Any] | None = None,
) -> Any:
    """Parse one JSON document read from a checkpoint, refusing what its readers would refuse.

    Args:
        raw: the file's bytes (the caller has already capped them at `limits.max_bytes`).
        where: how to name the document in messages (`dir/config.json`).
        limits: the document kind's caps.
        error: the exception class to raise (`ConfigError` for configs).
        object_pairs_hook, parse_int: passed to `json.loads` (the header reader's serde rules).

    Returns:
        The parsed value (any JSON type; callers check the shape they need).

    Raises:
        error: not UTF-8, a byte-order mark, not JSON, too deep, a huge integer, NaN where refused.
    """
    fix = limits.fix
    if raw.startswith(b"\xef\xbb\xbf"):
        raise error(
            f"{where}: starts with a UTF-8 byte-order mark, which transformers and vLLM refuse",
            hint="save the file as UTF-8 without BOM",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 (invalid byte at offset {exc.start})", hint=fix) from None
    hooks: dict[str, Any] = {} if limits.allow_constants else {"parse_constant": _refuse_constant}
    if object_pairs_hook is not None:
        hooks["object_pairs_hook"] = object_pairs_hook
    if parse_int is not None:
        hooks["parse_int"] = parse_int
    try:
        value = json.loads(text, **hooks)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno})", hint=fix) from None
    except RecursionError:
        raise error(f"{where}: nested deeper than {limits.max_depth} levels", hint=fix) from None
    except ValueError as exc:  # NaN/Infinity where refused, an integer over the 4,300-digit limit
        reason = "an integer over 4,300 digits" if "digits" in str(exc) else str(exc)
        raise error(f"{where}: {reason}", hint=fix) from None
    problem = None
    if limits.walk:
        problem = _depth_and_text(value, limits.max_depth)
    elif _SURROGATE.search(text):  # valid UTF-8 holds no surrogate: only a \\uD8xx escape makes one
        problem = _depth_and_text(value, 1 << 30)
    if problem:
        raise error(f"{where}: {problem}", hint=fix)
    return value
