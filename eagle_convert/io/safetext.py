"""Text from a file made safe for a terminal: the one escaping every name passes before display.

A tensor name, config value or path inside a checkpoint can hold ESC sequences (retitle the
terminal, hide text, fake a green "OK"), bidi overrides that reorder what is shown, or a lone
surrogate that cannot be encoded at all. `printable` writes each such character as a Python
escape (`\\x1b`, `\\u202e`, `\\ud800`), so output shows exactly what the file holds and nothing
in it reaches the terminal as a control.
"""

from __future__ import annotations

import re

# C0 and C1 controls (tab and newline are kept where lines are allowed), DEL, line/paragraph
# separators, bidi embeddings/overrides/isolates and marks, and surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_LINE = re.compile("[\t\n]|" + _UNSAFE.pattern)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with every control, bidi and surrogate character escaped.

    Args:
        text: anything that may come from a file.
        one_line: also escape tab and newline (an `Error:` line stays one line).

    Returns:
        `text` itself when it holds nothing to escape.
    """
    pattern = _UNSAFE_LINE if one_line else _UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text
