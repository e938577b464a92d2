"""The vLLM worker in use, so one worker (one vLLM import) serves a whole command or test run.

Every vLLM run (check's stages, smoke, report, drift, capture, `validate --load vllm`) asks
`engine_session` for its worker; a caller holding one makes it the one in use (`use_session`)
instead of threading it through every layer. A run that borrows it leaves it as a fresh command
would find it: no engine up (`EngineSession.release`), the worker kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from eagle_convert.vllm.session import EngineSession

_CURRENT: ContextVar[EngineSession | None] = ContextVar("eagle_convert_engine_session", default=None)


@contextmanager
def use_session(session: EngineSession) -> Iterator[EngineSession]:
    """Make `session` the one every vLLM run inside the block uses unless it is handed another."""
    token = _CURRENT.set(session)
    try:
        yield session
    finally:
        _CURRENT.reset(token)


@contextmanager
def engine_session(session: EngineSession | None = None) -> Iterator[EngineSession]:
    """`session` (the caller's, left as it is), else the one in use (left with no engine up), else a
    new one, in use inside the block and closed after it."""
    if session is not None:
        yield session
        return
    current = _CURRENT.get()
    if current is not None:
        try:
            yield current
        finally:
            current.release()
        return
    with EngineSession() as own, use_session(own):
        yield own
