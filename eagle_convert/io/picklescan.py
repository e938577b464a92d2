"""Bound a pickle before unpickling it: what `io.binranges` runs over `data.pkl` first.

A restricted `find_class` stops code execution, not resource exhaustion: a 12-byte pickle can ask
for a 1 GB memo (`LONG_BINPUT 0x7fffffff`), a `BINBYTES8` can claim 2^40 bytes that CPython
allocates before reading, and a few hundred KB of `TUPLE1` builds objects nested so deep that
`repr` or a comparison overflows the C stack. This pass walks the opcodes (`pickletools.genops`
reads from memory, so a length claim past the end is an error, not an allocation) and simulates
only the nesting depth of what each opcode would build, refusing the pickle before any object
exists. A `torch.save` state dict nests about 4 deep, uses sequential memo slots and creates
about 20 objects per tensor; the caps leave orders of magnitude of room.
"""

from __future__ import annotations

import pickletools

#: `data.pkl` of a 1,000-tensor state dict is about 200 KB.
MAX_PICKLE_BYTES = 16 << 20
MAX_DEPTH = 100
MAX_OBJECTS = 2_000_000

_MARK = -1
_PUTS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GETS = {"GET", "BINGET", "LONG_BINGET"}
# Opcodes that add to the container below their arguments rather than building a new object.
_MUTATORS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}


class PickleBombError(ValueError):
    """The pickle would need unbounded memory or nesting (the message says which)."""


def scan_pickle(data: bytes) -> None:
    """Refuse `data` unless unpickling it is bounded in memory and nesting depth.

    Raises:
        PickleBombError: too big, a memo slot out of order, nested too deep, too many objects.
        ValueError: not a well-formed pickle (bad opcode, truncated argument).
    """
    if len(data) > MAX_PICKLE_BYTES:
        raise PickleBombError(f"pickle of {len(data)} bytes, more than {MAX_PICKLE_BYTES >> 20} MiB")
    stack: list[int] = []
    memo: dict[int, int] = {}
    objects = 0
    for op, arg, _pos in pickletools.genops(data):
        name = op.name
        if name in _PUTS or name == "MEMOIZE":
            slot = len(memo) if name == "MEMOIZE" else int(arg)  # type: ignore[arg-type]
            if slot > len(memo):
                raise PickleBombError(f"memo slot {slot} out of order (next is {len(memo)})")
            memo[slot] = stack[-1] if stack else 0
            continue
        if name in _GETS:
            stack.append(memo.get(int(arg), 0))  # type: ignore[arg-type]
        elif name == "DUP":
            stack.append(stack[-1] if stack else 0)
        else:
            popped = _pop(stack, op)
            if name in _MUTATORS and popped:
                *args, container = popped
                depth = max([container] + [1 + a for a in args])
            else:
                depth = 1 + max(popped) if popped else 0
            for item in op.stack_after:
                stack.append(_MARK if item is pickletools.markobject else depth)
            if depth > MAX_DEPTH:
                raise PickleBombError(f"objects nested deeper than {MAX_DEPTH} levels")
        objects += 1
        if objects > MAX_OBJECTS or len(stack) > MAX_OBJECTS:
            raise PickleBombError(f"more than {MAX_OBJECTS} objects")


def _pop(stack: list[int], op: pickletools.OpcodeInfo) -> list[int]:
    """Depths of what `op` consumes, top first (the slice down to a MARK, then what lies below it)."""
    before = op.stack_before
    popped: list[int] = []
    below = len(before)
    if pickletools.markobject in before:
        while stack and stack[-1] != _MARK:
            popped.append(stack.pop())
        if not stack:
            raise ValueError(f"{op.name} without a MARK")
        stack.pop()
        below = before.index(pickletools.markobject)
    for _ in range(below):
        if not stack:
            raise ValueError(f"{op.name} on an empty stack")
        popped.append(max(stack.pop(), 0))
    return popped
