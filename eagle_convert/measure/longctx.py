"""Real long context, built at run time from text every Python installation has.

Two kinds of document, both read from the running interpreter, so nothing is shipped or downloaded:

- `code`: the standard library's own sources (`CODE_FILES`, read from `sysconfig`'s `stdlib`
  folder in that fixed order, a file the installation lacks left out), cut mid-file: the prompt
  ends at a continuation point ("continue the code from where it stops");
- `prose`: the reference documentation's topics in `pydoc_data.topics` (sorted by topic name),
  ending with a question about the last section.

Each prompt is cut to a real token count of the target's tokenizer: the whole prompt, rendered as
the engines will see it (chat template included), has between 99 % and 100 % of the requested
tokens. Lengths are in thousands (`1k` = 1,000 tokens, as SPEED-Bench's `throughput_1k`), so a
`32k` prompt still leaves room to generate in a 32,768-token context.

Deterministic: the same Python and the same tokenizer give the same prompts on every run (the file
list is fixed, topics are sorted, cuts are searched, not sampled). Different Python versions have
different standard-library text, so the prompts (not their lengths) differ between versions; the
provenance names the version.
"""

from __future__ import annotations

import math
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eagle_convert.errors import ConfigError, UsageError

LENGTHS = (1000, 4000, 8000, 16000, 32000)
KINDS = ("code", "prose")
ROWS_PER_LENGTH = 2  # prompts per kind and length, each from a different start in its corpus
TOLERANCE = 0.01  # a prompt has between (1 - TOLERANCE) * N and N tokens

# Large modules present as plain files in every CPython from 3.8 to 3.14 (datetime, pathlib and
# zipfile are left out: they became stubs or packages).
CODE_FILES = (
    "argparse.py", "ast.py", "calendar.py", "collections/__init__.py", "configparser.py",
    "dataclasses.py", "difflib.py", "email/message.py", "enum.py", "fractions.py", "ftplib.py",
    "functools.py", "gettext.py", "heapq.py", "inspect.py", "json/decoder.py", "json/encoder.py",
    "logging/__init__.py", "mailbox.py", "pickle.py", "pprint.py", "random.py", "shutil.py",
    "smtplib.py", "statistics.py", "string.py", "subprocess.py", "tarfile.py", "textwrap.py",
    "threading.py", "tokenize.py", "typing.py",
)  # fmt: skip

_CODE_HEAD = (
    "Below is Python source code from the standard library. Continue it from exactly where it "
    "stops, in the same style.\n\n"
)
_PROSE_HEAD = "Below are sections of the Python language reference.\n\n"
_PROSE_TAIL = "\n\nQuestion: what does the last section above explain? Answer in a few sentences."


@dataclass(frozen=True)
class LongPrompt:
    """One long-context prompt: `text` is the user message; `num_tokens` its rendered length."""

    id: str  # long-<kind>-<N>k-<row>
    category: str  # long-code or long-prose
    length: int  # the requested token count N
    text: str
    num_tokens: int
    source: str  # the documents it was cut from, and the Python version


def parse_lengths(value: str | Sequence[int | str] | None) -> tuple[int, ...]:
    """`"1k,4k"` -> (1000, 4000); plain token counts are kept; None or "" -> `LENGTHS`. Sorted.

    Raises:
        UsageError: a length that is not a count, or under 256 tokens (no room for the question).
    """
    if value is None or value == "":
        return LENGTHS
    items = value.split(",") if isinstance(value, str) else list(value)
    out: set[int] = set()
    for item in items:
        text = str(item).strip().lower()
        try:
            n = int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)
        except ValueError:
            raise UsageError(f"long-context length {item!r} is not a token count (use e.g. 1k,4k,32k)") from None
        if n < 256:
            raise UsageError(f"long-context length {n} is too short (at least 256 tokens)")
        out.add(n)
    return tuple(sorted(out))


def code_documents() -> list[tuple[str, str]]:
    """(name, source) of each `CODE_FILES` file this installation has, in `CODE_FILES` order.

    Raises:
        ConfigError: none of them is installed (a Python without its `.py` sources).
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    docs = []
    for name in CODE_FILES:
        path = root / name
        try:
            docs.append((name, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    if not docs:
        raise ConfigError(f"{root}: the standard library's .py sources are not installed (long-code needs them)")
    return docs


def prose_documents() -> list[tuple[str, str]]:
    """(topic, text) of every `pydoc_data.topics` topic, sorted by topic name.

    Raises:
        ConfigError: this Python has no `pydoc_data` (some minimal builds leave it out).
    """
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise ConfigError("this Python has no pydoc_data.topics (long-prose needs it)") from None
    return [(name, str(topics[name]).strip()) for name in sorted(topics)]


def build_long_prompts(
    count_tokens: Callable[[str], int],
    *,
    kinds: Sequence[str] = KINDS,
    lengths: Sequence[int] = LENGTHS,
    rows: int = ROWS_PER_LENGTH,
) -> list[LongPrompt]:
    """Cut `rows` prompts per kind and length, each to the requested token count.

    Args:
        count_tokens: the token count of a user message as the engines see it (rendered through
            the target's chat template and tokenized with its tokenizer).
        kinds: "code" and/or "prose".
        lengths: token counts N; each prompt has between 0.99 N and N tokens.
        rows: prompts per kind and length; row r starts at document r * D // rows of the D documents.

    Returns:
        The prompts, by kind, then length, then row.

    Raises:
        ConfigError: the corpus is missing (see `code_documents`, `prose_documents`), or a length
            cannot be met (shorter than the prompt's fixed words, or longer than the whole corpus).
    """
    out = []
    for kind in kinds:
        if kind not in KINDS:
            raise UsageError(f"long-context kind {kind!r} is unknown (expected {', '.join(KINDS)})")
        docs = code_documents() if kind == "code" else prose_documents()
        head, tail = (_CODE_HEAD, "") if kind == "code" else (_PROSE_HEAD, _PROSE_TAIL)
        version = ".".join(map(str, sys.version_info[:3]))
        for r in range(rows):
            start = r * len(docs) // rows
            body, names = _corpus(kind, docs[start:] + docs[:start])
            for n in lengths:
                cut, count = _fit(count_tokens, head, body, tail, n)
                used = [name for pos, name in names if pos < cut]
                where = "standard library sources" if kind == "code" else "pydoc_data.topics"
                source = f"Python {version} {where}: {', '.join(used[:3])}" + (
                    f" (+{len(used) - 3} more)" if len(used) > 3 else ""
                )
                label = f"{n // 1000}k" if n % 1000 == 0 else str(n)
                text = head + body[:cut] + tail
                out.append(LongPrompt(f"long-{kind}-{label}-{r}", f"long-{kind}", n, text, count, source))
    return out


def _corpus(kind: str, docs: list[tuple[str, str]]) -> tuple[str, list[tuple[int, str]]]:
    """The documents joined, and (start offset, name) of each."""
    parts, names, pos = [], [], 0
    for name, text in docs:
        block = f"# Lib/{name}\n{text.rstrip()}\n\n" if kind == "code" else f"{name}\n{'=' * len(name)}\n\n{text}\n\n"
        names.append((pos, name))
        parts.append(block)
        pos += len(block)
    return "".join(parts), names


def _snap(body: str, cut: int) -> int:
    """Back off to just after the last whitespace at or before `cut` (within 40 characters)."""
    cut = max(0, min(cut, len(body)))
    for i in range(cut, max(0, cut - 40), -1):
        if body[i - 1].isspace():
            return i
    return cut


def _fit(count: Callable[[str], int], head: str, body: str, tail: str, n: int) -> tuple[int, int]:
    """The cut of `body` whose prompt has between ceil(0.99 n) and n tokens: secant steps on the
    cut, kept inside a bracket, bisection when a step leaves it."""
    low = math.ceil((1 - TOLERANCE) * n)
    overhead = count(head + tail)
    if overhead >= low:
        raise ConfigError(f"long-context length {n}: the prompt's own words already take {overhead} tokens")
    aim = (low + n) / 2
    lo, hi = 0, len(body) + 1  # count at lo < low; count at hi > n (len(body) + 1: not yet tried)
    sample = body[: min(len(body), 4096)]
    ratio = len(sample) / max(1, count(head + sample + tail) - overhead)  # characters per token
    cut = _snap(body, int((aim - overhead) * ratio))
    for _ in range(40):
        got = count(head + body[:cut] + tail)
        if low <= got <= n:
            return cut, got
        if got < low:
            if cut >= len(body):
                raise ConfigError(f"long-context length {n}: the whole corpus has {got} tokens (use a shorter length)")
            lo = max(lo, cut)
        else:
            hi = min(hi, cut)
        step = min(len(body), int(cut + (aim - got) * cut / max(1, got - overhead)))
        nxt = step if step == len(body) else _snap(body, step)
        if not lo < nxt < hi:
            nxt = step if lo < step < hi else (lo + hi) // 2
        if nxt in (cut, lo, hi):
            nxt = (lo + hi) // 2
        if hi - lo <= 1:
            break
        cut = nxt
    raise ConfigError(f"long-context length {n}: no cut of the corpus gives {low}..{n} tokens with this tokenizer")
