"""Prompt sets for `smoke`, `check`, `report` and `drift`: the built-in set, JSONL files, chat
templates and context buckets (`measure/prepare.py`'s `prepare_smoke_prompts` renders and tokenizes a
suite for a target folder).

A prompt is either plain text or a list of chat messages. Both are rendered with the target's chat
template (a plain prompt becomes one user message) unless the template is turned off, and then
tokenized with the target's tokenizer, so every engine decodes from the same token ids.

Context buckets pad a prompt to about N tokens by prepending neutral filler text (a long built-in
document, `data/filler.jsonl`, cycled when N needs more) to its first user message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from eagle_convert.errors import ConfigError, UsageError

NATURAL = 0  # bucket id of unpadded prompts
NO_TEMPLATE = "none"  # --chat-template none: raw text, no template
_ROLES = ("system", "user", "assistant", "tool")
_FILLER_LEAD = "Background notes, unrelated to the request that follows:\n\n"
_FILLER_SEP = "\n\n---\n\n"


@dataclass(frozen=True)
class Prompt:
    """One prompt: `text` (plain) or `messages` (chat), never both."""

    id: str
    category: str
    text: str | None = None
    messages: tuple[dict[str, str], ...] | None = None

    def as_messages(self, prefix: str = "") -> list[dict[str, str]]:
        """Chat messages, with `prefix` prepended to the first user message."""
        msgs = [dict(m) for m in self.messages] if self.messages else [{"role": "user", "content": self.text or ""}]
        if prefix:
            first = next((m for m in msgs if m["role"] == "user"), msgs[0])
            first["content"] = prefix + first["content"]
        return msgs


@dataclass(frozen=True)
class PreparedPrompt:
    """A prompt rendered and tokenized for one context bucket."""

    id: str
    category: str
    bucket: int  # NATURAL or the requested length N
    token_ids: list[int] = field(repr=False)
    filler_words: int = 0

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class SkippedPrompt:
    id: str
    category: str
    bucket: int
    reason: str


@dataclass
class PromptSet:
    prompts: list[PreparedPrompt]
    skipped: list[SkippedPrompt]
    chat_template: str  # "target", "none", or the --chat-template source
    suite: str = "custom"  # the --prompts label ("built-in", a suite name, the path); `measure/suites.py`
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)  # prompt id -> Provenance.to_dict()
    refused: list[str] = field(default_factory=list)  # the suite's refusal lines (SPEED-Bench placeholders)


# ------------------------------------------------------------------------------------ loading


def _data_lines(name: str) -> list[str]:
    return (resources.files("eagle_convert") / "data" / name).read_text(encoding="utf-8").splitlines()


def builtin_prompts() -> list[Prompt]:
    """The built-in set written for this project: coding, chat, reasoning, long-document."""
    return _parse_lines(_data_lines("prompts.jsonl"), "built-in prompts.jsonl")


def filler_text() -> str:
    """The neutral document used to pad prompts into context buckets."""
    return "\n\n".join(json.loads(line)["text"] for line in _data_lines("filler.jsonl") if line.strip())


def load_prompts(path: str | Path) -> list[Prompt]:
    """Read a JSONL file: one object per line with `prompt` (text) or `messages`, optional
    `category` and `id`. Errors name the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{path}: prompts file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read prompts file: {exc}") from None
    prompts = _parse_lines(lines, str(path))
    if not prompts:
        raise ConfigError(f"{path}: no prompts (expected one JSON object per line)")
    return prompts


def json_lines(lines: Iterable[str], where: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank JSONL line; a bad line names `where:n`."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}:{n}: not valid JSON ({exc.msg})") from None
        yield n, obj


def _parse_lines(lines: Iterable[str], where: str) -> list[Prompt]:
    out: list[Prompt] = []
    seen: set[str] = set()
    for n, obj in json_lines(lines, where):
        prompt = _prompt_from(obj, f"{where}:{n}", default_id=f"p{n}")
        if prompt.id in seen:
            raise ConfigError(f"{where}:{n}: duplicate id {prompt.id!r}")
        seen.add(prompt.id)
        out.append(prompt)
    return out


def _prompt_from(obj: Any, where: str, *, default_id: str) -> Prompt:
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: expected a JSON object with 'prompt' or 'messages'")
    has_text, has_msgs = "prompt" in obj, "messages" in obj
    if has_text == has_msgs:
        raise ConfigError(f"{where}: needs exactly one of 'prompt' or 'messages'")
    category = obj.get("category", "custom")
    pid = obj.get("id", default_id)
    if not isinstance(category, str) or not category:
        raise ConfigError(f"{where}: 'category' must be a non-empty string")
    if not isinstance(pid, str) or not pid:
        raise ConfigError(f"{where}: 'id' must be a non-empty string")
    if has_text:
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            raise ConfigError(f"{where}: 'prompt' must be a non-empty string")
        return Prompt(pid, category, text=obj["prompt"])
    msgs = obj["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise ConfigError(f"{where}: 'messages' must be a non-empty list")
    for i, m in enumerate(msgs):
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise ConfigError(f"{where}: messages[{i}] needs string 'role' and 'content'")
        if m["role"] not in _ROLES:
            raise ConfigError(
                f"{where}: messages[{i}] has unknown role {m['role']!r} (expected one of {', '.join(_ROLES)})"
            )
    if not any(m["role"] == "user" for m in msgs):
        raise ConfigError(f"{where}: 'messages' has no user message")
    return Prompt(pid, category, messages=tuple({"role": m["role"], "content": m["content"]} for m in msgs))


# ------------------------------------------------------------------------------ options


def parse_buckets(value: str | Sequence[int] | None) -> list[int]:
    """`"natural,256,1024"` -> [0, 256, 1024]; `natural` (or 0) means unpadded. Sorted, unique."""
    if value is None or value == "":
        return [NATURAL]
    items = value.split(",") if isinstance(value, str) else list(value)
    out: set[int] = set()
    for item in items:
        text = str(item).strip().lower()
        if text in ("natural", "0"):
            out.add(NATURAL)
            continue
        try:
            n = int(text)
        except ValueError:
            raise UsageError(
                f"{{buckets}}: {item!r} is not a token count (use e.g. natural,256,1024)", options=("buckets",)
            ) from None
        if n < 16:
            raise UsageError(f"{{buckets}}: {n} is too short (at least 16 tokens)", options=("buckets",))
        out.add(n)
    return sorted(out)


def select_prompts(
    prompts: Sequence[Prompt],
    categories: Sequence[str] = (),
    limit: int | None = None,
    *,
    option: str = "--category",
) -> list[Prompt]:
    """--category (only these categories) and --limit (at most N per category), in file order;
    ``option`` names where the categories came from in the refusal of an unknown one."""
    if categories:
        known = sorted({p.category for p in prompts})
        unknown = [c for c in categories if c not in known]
        if unknown:
            raise UsageError(f"{option}: no prompts in {', '.join(unknown)} (available: {', '.join(known)})")
        prompts = [p for p in prompts if p.category in categories]
    if not limit:
        return list(prompts)
    seen: dict[str, int] = {}
    kept = []
    for p in prompts:
        seen[p.category] = seen.get(p.category, 0) + 1
        if seen[p.category] <= limit:
            kept.append(p)
    return kept


def resolve_chat_template(value: str | None) -> tuple[str | None, str]:
    """--chat-template value -> (template or None, label). None keeps the target's own template;
    `none` disables templating; an existing file is read; anything else is a literal template."""
    if value is None:
        return None, "target"
    if value.strip().lower() == NO_TEMPLATE:
        return NO_TEMPLATE, NO_TEMPLATE
    path = Path(value)
    if "{" not in value and path.is_file():
        return path.read_text(encoding="utf-8"), str(path)
    if "{" not in value:
        raise UsageError(
            f"{{chat_template}}: {value} is neither a file nor a jinja template (or 'none')", options=("chat_template",)
        )
    return value, "inline"


# ---------------------------------------------------------------------------- rendering


class _Renderer:
    def __init__(self, tokenizer: Any, template: str | None) -> None:
        self.tok = tokenizer
        self.raw = template == NO_TEMPLATE
        self.template = None if self.raw else template
        if not self.raw and self.template is None and not getattr(tokenizer, "chat_template", None):
            self.raw = True  # the target has no template: plain text, as vLLM's generate() would do

    def encode(self, prompt: Prompt, prefix: str = "") -> list[int]:
        msgs = prompt.as_messages(prefix)
        if self.raw:
            text = msgs[0]["content"] if len(msgs) == 1 else "\n\n".join(f"{m['role']}: {m['content']}" for m in msgs)
            return list(self.tok(text, add_special_tokens=True)["input_ids"])
        try:
            text = self.tok.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=True, chat_template=self.template
            )
        except Exception as exc:  # jinja errors of a user template
            raise ConfigError(f"chat template failed on prompt {prompt.id!r}: {exc}") from None
        return list(self.tok(text, add_special_tokens=False)["input_ids"])


def filler_prefix(words: list[str], n: int) -> str:
    """The first `n` filler words (cycled) as the text a padded prompt starts with (smoke's buckets, and
    `smoke --server`'s, padded with the server's tokenizer)."""
    if n <= 0:
        return ""
    reps = -(-n // len(words))
    chosen = (words * reps)[:n]
    return _FILLER_LEAD + " ".join(chosen) + _FILLER_SEP


def prepare_prompts(
    prompts: Sequence[Prompt],
    tokenizer: Any,
    *,
    buckets: Sequence[int] = (NATURAL,),
    chat_template: str | None = None,
    template_label: str = "target",
    max_prompt_tokens: int | None = None,
    sized: Mapping[str, int] | None = None,
) -> PromptSet:
    """Render and tokenize every prompt once per bucket.

    A bucket N pads the prompt with filler words to the largest length <= N tokens (binary search on
    the number of words); prompts already longer than N, or longer than `max_prompt_tokens`, are
    skipped with a reason rather than truncated. A prompt named in `sized` (id -> N: real long
    context already cut to N tokens, `measure/longctx.py`) is measured once, as it is, in bucket N.
    """
    sized = sized or {}
    render = _Renderer(tokenizer, chat_template)
    words = filler_text().split()
    out: list[PreparedPrompt] = []
    skipped: list[SkippedPrompt] = []
    for bucket in buckets:
        if max_prompt_tokens is not None and bucket > max_prompt_tokens:
            raise UsageError(
                f"{{buckets}}: {bucket} tokens leave no room for generation "
                f"(at most {max_prompt_tokens} prompt tokens fit the target's context)",
                options=("buckets",),
            )
    for p in prompts:
        base = render.encode(p)
        if p.id in sized:
            if max_prompt_tokens is not None and len(base) > max_prompt_tokens:
                why = f"{len(base)} tokens, longer than the target's context allows"
                skipped.append(SkippedPrompt(p.id, p.category, sized[p.id], why))
            else:
                out.append(PreparedPrompt(p.id, p.category, sized[p.id], base))
            continue
        for bucket in buckets:
            limit = max_prompt_tokens if bucket == NATURAL else bucket
            if limit is not None and len(base) > limit:
                why = (
                    "longer than the target's context allows" if bucket == NATURAL else "already longer than the bucket"
                )
                skipped.append(SkippedPrompt(p.id, p.category, bucket, f"{len(base)} tokens, {why}"))
                continue
            if bucket == NATURAL:
                out.append(PreparedPrompt(p.id, p.category, bucket, base))
                continue
            ids, n_words = _pad(render, p, words, bucket, base)
            out.append(PreparedPrompt(p.id, p.category, bucket, ids, n_words))
    return PromptSet(out, skipped, template_label)


def _pad(render: _Renderer, p: Prompt, words: list[str], target: int, base: list[int]) -> tuple[list[int], int]:
    """Largest filler word count whose encoded prompt fits in `target` tokens."""
    best, best_ids = 0, base
    lo, hi = 1, max(1, target)  # a word costs >= ~1 token, so `target` words always overshoots
    while lo <= hi:
        mid = (lo + hi) // 2
        ids = render.encode(p, filler_prefix(words, mid))
        if len(ids) <= target:
            best, best_ids, lo = mid, ids, mid + 1
        else:
            hi = mid - 1
    return best_ids, best


def _target_context(target: Path) -> int | None:
    from eagle_convert.draft import Target

    return Target.from_folder(target).max_position_embeddings
