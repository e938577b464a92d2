"""check's serve stage: the draft as deployed, held to the policy's [serve] floors, against a tiny
OpenAI-compatible server on loopback (`tests/servedfake.py`: AL 3.0 exactly, k = 3, at every level).
The real vLLM servers' run of the same stage is in tests/test_served_vllm.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.errors import UsageError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonschemas import check_schema  # noqa: E402
from servedfake import FakeServer  # noqa: E402

SERVE = 'concurrency = [1, 2]\nmax_new_tokens = 13\nlimit = 1\ncategories = ["coding"]\n'


@pytest.fixture(scope="module")
def draft(built_fixtures) -> Path:
    return built_fixtures("vllm-eagle3")


def _check(draft: Path, policy: Path, *extra: str):
    res = CliRunner().invoke(main, ["check", str(draft), "--policy", str(policy), "--json", *extra])
    return res, (json.loads(res.stdout) if res.stdout.startswith("{") else None)


def _serve(data: dict) -> dict[str, dict]:
    return {c["name"]: c for c in data["checks"] if c["stage"] == "serve"}


def test_the_serve_stage_passes_and_fails_on_floors(draft: Path, tmp_path: Path) -> None:
    with FakeServer(k=3, accept=2) as srv, FakeServer(k=None, delay=0.002) as base:
        policy = tmp_path / "eagle-check.toml"
        floors = "min_acceptance_length = 2.5\nmin_per_position = [0.9, 0.9]\nmin_speedup = { 1 = 0.01, 2 = 0.01 }\n"
        policy.write_text(
            f'[engine]\nload = false\n[serve]\nserver = "{srv.url}"\nbaseline_server = "{base.url}"\n{SERVE}{floors}'
        )
        res, data = _check(draft, policy)
        assert res.exit_code == 0, res.output
        check_schema(data, "check-report.schema.json")
        checks = _serve(data)
        assert list(checks) == [
            "served draft",
            "served AL (c=1)",
            "served per-position (c=1)",
            "served speedup (c=1)",
            "served AL (c=2)",
            "served per-position (c=2)",
            "served speedup (c=2)",
        ]
        assert all(c["status"] == "pass" for c in checks.values())
        assert checks["served AL (c=1)"]["figure"] == 3.0 and checks["served AL (c=1)"]["threshold"] == ">= 2.5"
        assert checks["served per-position (c=2)"]["figure"] == "1.000 / 1.000"
        assert checks["served draft"]["message"].startswith("confirmed: AL 3 plausible for k=3. Not confirmable:")
        assert next(s for s in data["stages"] if s["stage"] == "serve")["status"] == "pass"

        # the same server under higher floors: AL 3 < 3.5, position 3 (0.0) < 0.5, speedup < 1000
        policy.write_text(
            f'[engine]\nload = false\n[serve]\nserver = "{srv.url}"\nbaseline_server = "{base.url}"\n{SERVE}'
            "min_acceptance_length = 3.5\nmin_per_position = [0.5, 0.5, 0.5]\nmin_speedup = 1000\n"
        )
        res, data = _check(draft, policy)
        assert res.exit_code == 1
        checks = _serve(data)
        assert checks["served AL (c=1)"]["status"] == "fail"
        assert checks["served AL (c=1)"]["message"].endswith("; floor 3.5: 0.5 short")
        assert checks["served per-position (c=2)"]["message"] == "position 3: 0.000 < 0.500"
        assert checks["served speedup (c=2)"]["status"] == "fail" and checks["served speedup (c=2)"]["threshold"] == (
            ">= 1000"
        )


def test_check_server_from_the_command_line(draft: Path, tmp_path: Path) -> None:
    """--server turns the stage on without a [serve] table (figures reported, no floors); a server k
    other than the one checked (--speculative-config) fails the identity check."""
    policy = tmp_path / "p.toml"
    policy.write_text(f"[engine]\nload = false\n[serve]\n{SERVE}")
    with FakeServer(k=3, accept=1) as srv:
        res, data = _check(draft, policy, "--server", srv.url)
        assert res.exit_code == 0, res.output
        assert _serve(data)["served AL (c=1)"]["figure"] == 2.0 and _serve(data)["served AL (c=1)"]["status"] == "skip"
        spec = '{"method": "eagle3", "num_speculative_tokens": 4}'
        res, data = _check(draft, policy, "--server", srv.url, "--speculative-config", spec)
        assert res.exit_code == 1
        assert _serve(data)["served draft"]["message"].startswith("it drafts k=3 tokens, the check's k is 4. ")


def test_a_server_that_cannot_be_measured_is_a_failed_check(draft: Path, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    with FakeServer(k=None) as srv:
        policy.write_text(f'[engine]\nload = false\n[serve]\nserver = "{srv.url}"\n{SERVE}')
        res, data = _check(draft, policy)
    assert res.exit_code == 1
    [c] = _serve(data).values()
    assert c["name"] == "served deployment" and c["status"] == "fail"
    assert c["message"].startswith(f"the server at {srv.url} runs without a draft")


def test_policy_errors(tmp_path: Path) -> None:
    from eagle_convert.check import load_policy
    from eagle_convert.check.gate import serve_target

    policy = tmp_path / "p.toml"
    policy.write_text("[serve]\nmin_speedup = { 1 = -1 }\n")
    with pytest.raises(UsageError, match=r"\[serve\] min_speedup 1 must be >= 0, not -1"):
        load_policy(policy)
    policy.write_text("[serve]\nconcurrency = [1]\n")
    with pytest.raises(
        UsageError,
        match=r"\[serve\] needs server = URL \(or `server`\) \(add server = URL to \[serve\], or pass `server`\)$",
    ):
        serve_target(load_policy(policy))


def test_a_server_exposing_its_speculative_config_confirms_or_refutes_the_draft(draft: Path, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    for served, ok in ((f"/models/{draft.name}", True), ("/models/another-draft", False)):
        with FakeServer(k=3, accept=2, speculative={"model": served, "num_speculative_tokens": 3}) as srv:
            policy.write_text(f'[engine]\nload = false\n[serve]\nserver = "{srv.url}"\n{SERVE}')
            res, data = _check(draft, policy)
        check = _serve(data)["served draft"]
        assert (res.exit_code, check["status"]) == ((0, "pass") if ok else (1, "fail"))
        expected = f"its speculative config loads {served}" + ("" if ok else f", not {draft}")
        assert check["message"] == (f"confirmed: {expected}, AL 3 plausible for k=3" if ok else expected)
