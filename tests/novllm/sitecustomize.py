"""vLLM hidden or guarded, in the test process and in every Python process a test starts.

On ``PYTHONPATH`` this module is imported by every Python that starts (the ``site`` module imports
``sitecustomize``), so a test's subprocesses (CLI runs, vLLM workers) obey the same rule:
- ``EAGLE_CONVERT_TEST_HIDE_VLLM=1``: vLLM is absent, as on a machine without it (``find_spec``
  and ``import`` both fail): how the tier without vLLM is shown to pass on a machine with it
  (``PYTHONPATH=tests/novllm EAGLE_CONVERT_TEST_HIDE_VLLM=1 pytest -m "not vllm"``).
- ``EAGLE_CONVERT_TEST_VLLM_RECORD=FILE``: importing vLLM fails and is recorded in FILE (the
  module and the importing line); `tests/conftest.py` sets it for every test not marked ``vllm``
  and fails such a test when FILE is not empty. A probe (``importlib.util.find_spec``) still sees
  vLLM: only an import counts as needing it.
Imports only what every Python has loaded at start-up (tests measure start-up imports).
"""

from __future__ import annotations

import builtins
import importlib
import os
import sys

HIDE_ENV = "EAGLE_CONVERT_TEST_HIDE_VLLM"
RECORD_ENV = "EAGLE_CONVERT_TEST_VLLM_RECORD"


def is_vllm(name: str) -> bool:
    return name == "vllm" or name.startswith("vllm.")


class HideVllm:
    """A meta-path finder that finds no ``vllm``: imports and ``find_spec`` fail as if it were not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if is_vllm(name):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: {HIDE_ENV})", name=name)
        return None


def guard_imports(refuse) -> None:
    """Route every ``import vllm...`` (statement or `importlib.import_module`) through
    ``refuse(module, "file:line")``; when it returns True the import fails."""
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def check(name: str) -> None:
        frame = sys._getframe(2)  # the importing code (check <- the wrapper <- the caller)
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        if refuse(name, where):
            raise ModuleNotFoundError(
                f"No module named {name!r}: a test not marked vllm imports it ({where}); "
                "mark the test @pytest.mark.vllm",
                name=name,
            )

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and is_vllm(name):
            check(name)
        return real_import(name, globals, locals, fromlist, level)

    def guarded_import_module(name, package=None):
        if is_vllm(name):
            check(name)
        return real_import_module(name, package)

    builtins.__import__ = guarded_import
    importlib.import_module = guarded_import_module


def record_to(path: str):
    """A `guard_imports` rule: refuse every vLLM import, appending it to the file ``path``."""

    def refuse(name: str, where: str) -> bool:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{name} imported at {where} (process {os.getpid()})\n")
        return True

    return refuse


def from_env() -> None:
    """What the environment asks of this process (see the module doc)."""
    if os.environ.get(HIDE_ENV) == "1":
        sys.meta_path.insert(0, HideVllm())
    if os.environ.get(RECORD_ENV):
        guard_imports(record_to(os.environ[RECORD_ENV]))


if __name__ == "sitecustomize":  # started with tests/novllm on PYTHONPATH (conftest loads it by path)
    from_env()
