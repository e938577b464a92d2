"""Shared test setup: offline hub, isolated HF cache, fixtures built once per session, and the
``vllm`` marker enforced.

The marker says what a test needs, so ``pytest -m "not vllm"`` passes on a machine without vLLM:
- a test marked ``vllm`` is skipped where vLLM is not installed;
- a test not marked ``vllm`` fails when it, or a Python process it starts, imports vLLM (the
  import is refused and named: `tests/novllm/sitecustomize.py`). Asking whether vLLM is installed
  (``find_spec``, the installed version) is no import and stays allowed.
A test not marked ``vllm`` also sees vLLM ``RUN_RELEASE`` as the installed release (`_pinned_release`),
so its verdicts do not depend on which vLLM, if any, is installed.
``PYTHONPATH=tests/novllm EAGLE_CONVERT_TEST_HIDE_VLLM=1 pytest -m "not vllm"`` runs the tier as on
a machine without vLLM. ``slow`` marks the tests that build trained fixtures or large inputs:
``-m "not slow"`` is the quick loop (``make test-fast``). Hypothesis profiles: ``dev`` (the default,
200 examples) and ``ci`` (2,000: the fuzz's CI size), chosen with ``--hypothesis-profile`` (``make test``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("dev", max_examples=200)
settings.register_profile("ci", max_examples=2000)
settings.load_profile("dev")  # --hypothesis-profile, read after this file, overrides it

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # makes the top-level `fixtures` package importable

from eagle_convert.extras import module_available  # noqa: E402

GUARD_DIR = Path(__file__).resolve().parent / "novllm"
_spec = importlib.util.spec_from_file_location("novllm_guard", GUARD_DIR / "sitecustomize.py")
assert _spec is not None and _spec.loader is not None
novllm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(novllm)

HAVE_VLLM = module_available("vllm")  # before any guard: what this machine has
_guard: dict[str, object] = {"on": False, "seen": []}


def _refuse_in_process(name: str, where: str) -> bool:
    if not _guard["on"]:
        return False  # a vllm-marked test, collection, or a fixture outside a guarded phase
    _guard["seen"].append(f"{name} imported at {where}")  # type: ignore[attr-defined]
    return True


def pytest_configure(config: pytest.Config) -> None:
    novllm.guard_imports(_refuse_in_process)
    # A shell without job control starts a background command (`make test &`, `(pytest ...) &`) with
    # SIGINT ignored, and every process below inherits that; eagle-convert keeps an ignored SIGINT
    # ignored (as under nohup), so the Ctrl-C tests would see no interrupt. Start as a terminal would.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config._vllm_record_dir = tempfile.mkdtemp(prefix="eagle-convert-vllm-guard-")  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(getattr(config, "_vllm_record_dir", ""), ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAVE_VLLM:
        return
    skip = pytest.mark.skip(reason="needs vLLM, which is not installed here")
    for item in items:
        if item.get_closest_marker("vllm") is not None:
            item.add_marker(skip)


@contextmanager
def _vllm_guarded(item: pytest.Item) -> Iterator[None]:
    """A test not marked vllm runs with vLLM imports refused, here and in its subprocesses; any
    attempt fails it, naming the importing line."""
    if item.get_closest_marker("vllm") is not None:
        with _shared_vllm_worker():  # the run's one vLLM worker (below)
            yield
        return
    record = Path(item.config._vllm_record_dir) / "imports.txt"  # type: ignore[attr-defined]
    record.unlink(missing_ok=True)
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", novllm.RECORD_ENV)}
    os.environ[novllm.RECORD_ENV] = str(record)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(GUARD_DIR), saved["PYTHONPATH"]) if p)
    _guard["on"], _guard["seen"] = True, []
    try:
        yield
    finally:
        _guard["on"] = False
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        seen = list(_guard["seen"]) + (record.read_text().splitlines() if record.is_file() else [])  # type: ignore[call-overload]
        if seen:
            pytest.fail(
                f"{item.nodeid} is not marked vllm but imports vLLM: {seen[0]}"
                + (f" (and {len(seen) - 1} more)" if len(seen) > 1 else "")
                + "; mark it @pytest.mark.vllm, or make it not need vLLM",
                pytrace=False,
            )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _vllm_guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _vllm_guarded(item):
        return (yield)


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nothing may reach the real hub; hub tests opt back in against a local server."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("EAGLE_CONVERT_DEBUG", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # piped output is PIPED_WIDTH wide unless a test sets it


@pytest.fixture(autouse=True)
def _pinned_release(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test not marked vllm sees vLLM `RUN_RELEASE` installed, whatever is (or is not) installed
    here: verdicts that default to the installed release do not change with the machine. A vllm
    test sees the real installation; a test about detecting it patches `vllm_version` itself."""
    if request.node.get_closest_marker("vllm") is not None:
        return
    import eagle_convert.vllm_model as face
    from eagle_convert.vllm_model import features
    from eagle_convert.vllm_model.versions import RUN_RELEASE

    real = features.vllm_version

    def pinned(pkg: Path | None = None) -> str | None:
        return RUN_RELEASE if pkg is None else real(pkg)

    monkeypatch.setattr(features, "vllm_version", pinned)
    monkeypatch.setattr(face, "vllm_version", pinned)


# The signal handlers are the whole process's: one a test leaves changed meets every later test in
# that process, and an xdist worker dies outright ("node down: Not properly terminated") on a SIGTERM
# or SIGHUP met at SIG_DFL or by `cli.entry._quit` (which calls os._exit). So each test must leave
# them as it found them; the guard puts them back and fails the test that did not.
GUARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)


def _handler_name(h: object) -> str:
    return getattr(h, "__qualname__", None) or getattr(h, "name", None) or repr(h)


@pytest.fixture(autouse=True)
def _signal_handlers_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in GUARDED_SIGNALS}
    yield
    changed = {s: signal.getsignal(s) for s, h in before.items() if signal.getsignal(s) != h}
    for s in changed:
        signal.signal(s, before[s] if before[s] is not None else signal.SIG_DFL)
    if changed:
        what = ", ".join(
            f"{signal.Signals(s).name} ({_handler_name(before[s])} -> {_handler_name(h)})" for s, h in changed.items()
        )
        pytest.fail(
            f"{request.node.nodeid} left the signal handler of {what} changed; restore it "
            "(monkeypatch, or try/finally), or later tests in this process meet it",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def built_fixtures(tmp_path_factory: pytest.TempPathFactory):
    """name -> folder of a FIXTURE_MATRIX draft, built on first use and shared by all tests."""
    from fixtures.drafts import FIXTURE_MATRIX, build_draft

    base = tmp_path_factory.mktemp("drafts")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = build_draft(base / name, FIXTURE_MATRIX[name])
        return cache[name]

    return get


@pytest.fixture
def hf_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Online against local servers only: fresh HF cache, no token, no request off loopback."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hubserver import isolated_hf_client

    with isolated_hf_client(tmp_path, monkeypatch):
        yield


# ------------------------------------------------------------------ one vLLM worker for the test run
# A vllm test, its fixtures included, runs its vLLM passes in ONE worker: one vLLM import for the whole
# run instead of one per module (`vllm.use_session`). A test that hands a command its own
# `EngineSession` (one about worker start, timeout or crash) keeps it. Each command leaves the worker
# with no engine up (`vllm.engine_session`), and so does each test, so a test measures what its
# command alone would: engine starts, swaps and outputs as with a fresh worker.
_VLLM_WORKER: list[Any] = []


def _vllm_worker() -> Any:
    if not _VLLM_WORKER:
        from eagle_convert.vllm import EngineSession

        _VLLM_WORKER.append(EngineSession())  # starts on first use
    return _VLLM_WORKER[0]


@contextmanager
def _shared_vllm_worker() -> Iterator[None]:
    from eagle_convert.vllm import use_session

    session = _vllm_worker()
    try:
        with use_session(session):
            yield
    finally:
        session.release()


@pytest.fixture(scope="session")
def vllm_session() -> Any:
    """The run's one vLLM worker (`EngineSession`), for a test that drives it or hands it on."""
    return _vllm_worker()


@pytest.fixture
def vllm_fresh_engines(vllm_session: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The run's one vLLM worker with engine sharing off: each request a fresh engine, as vLLM serves a draft."""
    monkeypatch.setattr(vllm_session, "share", False)
    return vllm_session


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _VLLM_WORKER:
        _VLLM_WORKER.pop().close()
