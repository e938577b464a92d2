"""The vLLM worker in use (`vllm/current.py`): who gets which session, and what is left behind.

No vLLM needed: a session that never started a worker is enough to see which one a run gets, and
whether it is released (the engine stopped, the worker kept) or closed. The real worker's `release`
op is run by `test_engine_sharing.py` and, after every vllm test, by `tests/conftest.py`."""

from __future__ import annotations

import pytest

from eagle_convert.measure import Engines
from eagle_convert.vllm import EngineRun, EngineSession, PassResult, PassSpec, engine_session, use_session


def _watched(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    monkeypatch.setattr(EngineSession, "release", lambda self: calls.append(f"release {id(self)}"))
    monkeypatch.setattr(EngineSession, "close", lambda self: calls.append(f"close {id(self)}"))


def test_a_run_without_a_session_opens_one_shares_it_inside_and_closes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    _watched(monkeypatch, calls)
    with engine_session() as own:
        with engine_session() as inner:  # a nested run (report's measure, then its drift) shares it
            assert inner is own
        assert calls == [f"release {id(own)}"]  # the nested run leaves no engine up
    assert calls == [f"release {id(own)}", f"close {id(own)}"]
    with engine_session() as later:
        assert later is not own  # nothing in use any more


def test_a_run_borrows_the_session_in_use_and_leaves_it_released_not_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    _watched(monkeypatch, calls)
    shared, given = EngineSession(), EngineSession()
    with use_session(shared):
        with engine_session() as got:
            assert got is shared
        with engine_session(given) as got:  # the caller's own session wins, left as it is
            assert got is given
    assert calls == [f"release {id(shared)}"]


def test_engines_borrow_the_session_in_use_and_count_only_their_own_worker_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    calls: list[str] = []
    _watched(monkeypatch, calls)
    result = PassResult([0], [[1]], None, 0, 0, 0, [0], 0.1, None)

    def engine(self, target, draft, prompts, passes, **kw):
        return EngineRun(str(draft), "0.32.0", {p.name: result for p in passes})

    monkeypatch.setattr(EngineSession, "engine", engine)
    shared = EngineSession()
    shared.worker_starts = 2  # started by earlier runs
    with use_session(shared):
        engines = Engines()
        engines.passes(
            "candidate",
            tmp_path,
            None,
            [[1]],
            [PassSpec("main")],
            k=3,
            max_new_tokens=4,
            max_model_len=64,
            seed=0,
            timeout_s=10,
        )
        assert engines.session is shared and engines.worker_starts == 0
        shared.worker_starts += 1  # the worker died and this run restarted it
        assert engines.worker_starts == 1
        engines.close()
    assert calls == [f"release {id(shared)}"]


def test_the_worker_release_op_stops_the_engine_and_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from eagle_convert.vllm import session_worker

    stopped: list[object] = []
    monkeypatch.setattr(session_worker, "shutdown_engine", stopped.append)
    engine = object()
    monkeypatch.setattr(session_worker._Live, "llm", engine)
    monkeypatch.setattr(session_worker._Live, "key", "k")
    assert session_worker._handle({"op": "release"}) == {"ok": True}
    assert stopped == [engine] and session_worker._Live.llm is None and session_worker._Live.key is None
