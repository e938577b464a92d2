"""Shared test setup: offline hub, isolated HF cache, fixtures built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # makes the top-level `fixtures` package importable


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nothing may reach the real hub; hub tests opt back in against a local server."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("EAGLE_CONVERT_DEBUG", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # piped output is PIPED_WIDTH wide unless a test sets it


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
