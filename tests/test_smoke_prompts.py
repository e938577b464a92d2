"""Prompt sets for `smoke`: built-in set, JSONL parsing errors, buckets, chat templates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle_convert.cli.errors import format_error
from eagle_convert.errors import ConfigError, UsageError
from eagle_convert.measure.prompts import (
    NATURAL,
    Prompt,
    builtin_prompts,
    filler_text,
    load_prompts,
    parse_buckets,
    prepare_prompts,
    resolve_chat_template,
)


def test_builtin_set_has_the_four_labelled_categories() -> None:
    prompts = builtin_prompts()
    cats = {p.category for p in prompts}
    assert cats == {"coding", "chat", "reasoning", "long-document"}
    assert len({p.id for p in prompts}) == len(prompts)
    assert all(sum(p.category == c for p in prompts) >= 3 for c in cats)
    assert any(p.text for p in prompts) and any(p.messages for p in prompts)
    assert len(filler_text().split()) > 1000


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_load_prompts_plain_and_chat(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        json.dumps({"prompt": "hi", "category": "x"}),
        "",
        json.dumps({"id": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}),
    )
    a, b = load_prompts(path)
    assert (a.id, a.category, a.text) == ("p1", "x", "hi")
    assert (b.id, b.category, b.messages[1]["content"]) == ("m", "custom", "u")
    assert b.as_messages("PAD ")[1]["content"] == "PAD u"  # filler goes into the first user message
    assert a.as_messages() == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "p.jsonl:2: not valid JSON (Expecting property name enclosed in double quotes)"),
        ('["a"]', "p.jsonl:2: expected a JSON object with 'prompt' or 'messages'"),
        ('{"category": "x"}', "p.jsonl:2: needs exactly one of 'prompt' or 'messages'"),
        ('{"prompt": "a", "messages": []}', "p.jsonl:2: needs exactly one of 'prompt' or 'messages'"),
        ('{"prompt": ""}', "p.jsonl:2: 'prompt' must be a non-empty string"),
        (
            '{"messages": [{"role": "robot", "content": "x"}]}',
            "p.jsonl:2: messages[0] has unknown role 'robot' (expected one of system, user, assistant, tool)",
        ),
        ('{"messages": [{"role": "system", "content": "x"}]}', "p.jsonl:2: 'messages' has no user message"),
        ('{"id": "p1", "prompt": "again"}', "p.jsonl:2: duplicate id 'p1'"),
    ],
)
def test_load_prompts_errors_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path, '{"prompt": "ok"}', line)
    with pytest.raises(ConfigError) as err:
        load_prompts(path)
    assert str(err.value) == f"{tmp_path}/{message}"


def test_load_prompts_missing_and_empty(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.jsonl: prompts file not found$"):
        load_prompts(tmp_path / "nope.jsonl")
    with pytest.raises(ConfigError, match=r"p.jsonl: no prompts"):
        load_prompts(_write(tmp_path, ""))


def test_parse_buckets() -> None:
    assert parse_buckets(None) == [NATURAL]
    assert parse_buckets("1024, natural,256,256") == [NATURAL, 256, 1024]
    with pytest.raises(UsageError) as err:
        parse_buckets("natural,long")
    # The library names the keyword; the command line spells it as the flag (cli/errors.py).
    assert str(err.value) == "`buckets`: 'long' is not a token count (use e.g. natural,256,1024)"
    assert format_error(err.value) == "--buckets: 'long' is not a token count (use e.g. natural,256,1024)"
    with pytest.raises(UsageError, match=r"^`buckets`: 8 is too short \(at least 16 tokens\)$"):
        parse_buckets("8")


def test_resolve_chat_template(tmp_path: Path) -> None:
    assert resolve_chat_template(None) == (None, "target")
    assert resolve_chat_template("none") == ("none", "none")
    f = tmp_path / "t.jinja"
    f.write_text("{{ messages[0]['content'] }}")
    assert resolve_chat_template(str(f)) == ("{{ messages[0]['content'] }}", str(f))
    assert resolve_chat_template("{{ 'x' }}") == ("{{ 'x' }}", "inline")
    with pytest.raises(UsageError, match="is neither a file nor a jinja template"):
        resolve_chat_template(str(tmp_path / "missing.jinja"))


@pytest.fixture(scope="module")
def tokenizer():
    from fixtures.target import build_tokenizer

    return build_tokenizer()


def _with_template(tok):
    from fixtures.target import CHAT_TEMPLATE

    tok.chat_template = CHAT_TEMPLATE
    return tok


def test_prepare_pads_to_bucket_and_skips_longer(tokenizer) -> None:
    tok = _with_template(tokenizer)
    prompts = [p for p in builtin_prompts() if p.id in ("chat-explain", "longdoc-qa")]
    pset = prepare_prompts(prompts, tok, buckets=[NATURAL, 400], max_prompt_tokens=2000)
    got = {(p.id, p.bucket): p for p in pset.prompts}
    assert set(got) == {("chat-explain", 0), ("chat-explain", 400), ("longdoc-qa", 0)}
    padded = got["chat-explain", 400]
    assert 380 <= padded.num_tokens <= 400 and padded.filler_words > 0
    assert got["chat-explain", 0].filler_words == 0
    # The padded prompt still ends with the same request and generation prompt.
    tail = got["chat-explain", 0].token_ids[-40:]
    assert padded.token_ids[-40:] == tail
    [skip] = pset.skipped
    assert (skip.id, skip.bucket) == ("longdoc-qa", 400)
    assert skip.reason.endswith("tokens, already longer than the bucket")
    with pytest.raises(UsageError, match=r"^`buckets`: 4000 tokens leave no room"):
        prepare_prompts(prompts, tok, buckets=[4000], max_prompt_tokens=2000)


def test_chat_template_override_and_none(tokenizer) -> None:
    tok = _with_template(tokenizer)
    p = [Prompt("a", "c", text="Sphinx of black quartz")]
    templ = prepare_prompts(p, tok).prompts[0].token_ids
    raw = prepare_prompts(p, tok, chat_template="none").prompts[0].token_ids
    custom = prepare_prompts(p, tok, chat_template="Q: {{ messages[0]['content'] }}\nA:").prompts[0].token_ids
    assert tok.decode(templ).startswith("<|begin_of_text|><|start_header_id|>user")
    assert "<|start_header_id|>" not in tok.decode(raw)
    assert tok.decode(custom) == "Q: Sphinx of black quartz\nA:"
    with pytest.raises(ConfigError, match=r"^chat template failed on prompt 'a': "):
        prepare_prompts(p, tok, chat_template="{{ messages[0].nope() }}")
