"""`smoke --server`: the command line against real sockets (a closed port, tiny servers that answer
wrongly: `tests/servedfake.py`), exact one-line errors and exit codes (3: the server could not be
measured, 2: usage), and `--json` in smoke's schema."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonschemas import check_schema  # noqa: E402
from servedfake import FakeServer  # noqa: E402

FAST = ["--limit", "1", "--category", "coding", "--max-new-tokens", "9"]


def _smoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["smoke", *args], env={"OPENAI_API_KEY": "", **(env or {})})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_json_keeps_smokes_shape_with_the_servers_figures() -> None:
    with FakeServer(k=3, accept=1) as srv, FakeServer(k=None) as base:
        res = _smoke(
            "--server",
            srv.url,
            "--label",
            "eagle31",
            "--baseline-server",
            base.url,
            "--concurrency",
            "1,2",
            *FAST,
            "--json",
        )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    check_schema(data, "smoke-report.schema.json")
    # 9 tokens: prefill + 4 rounds accepting 1 of 3 -> AL 2, positions 1, 0, 0
    assert data["engine"] == "server" and data["settings"]["k"] == 3 and data["settings"]["concurrency"] == [1, 2]
    [d] = data["drafts"]
    assert (d["label"], d["path"]) == ("eagle31", srv.url)
    assert d["total"]["acceptance_length"] == 2.0 and d["total"]["per_position"] == [1.0, 0.0, 0.0]
    assert data["throughput"]["concurrency"] == [1, 2] and set(data["throughput"]["speedup"]["eagle31"]) == {"1", "2"}
    levels = data["servers"][0]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2] and all(lv["per_user_tokens_per_s"] > 0 for lv in levels)
    assert all(lv["speedup"] > 0 and lv["failed"] == 0 for lv in levels)
    assert data["baseline_server"]["k"] is None and data["baseline_server"]["url"] == base.url


def test_the_api_key_is_sent_and_never_printed() -> None:
    secret = "sk-test-0123456789"
    with FakeServer(mode="auth", api_key=secret) as srv:
        res = _smoke("--server", srv.url, *FAST, "--concurrency", "1")
        assert (res.exit_code, res.stderr.splitlines()[-1]) == (
            3,
            f"Error: the server at {srv.url} refused /v1/models (HTTP 401: Unauthorized) "
            "(give --api-key or set OPENAI_API_KEY)",
        )
        res = _smoke("--server", srv.url, *FAST, "--concurrency", "1", env={"OPENAI_API_KEY": secret})
        assert res.exit_code == 0, res.output
        assert secret not in res.output
        res = _smoke("--server", srv.url, *FAST, "--concurrency", "1", "--api-key", "wrong", "--json")
        assert res.exit_code == 3 and "wrong" not in res.output


@pytest.mark.parametrize(
    ("mode", "extra", "message"),
    [
        (
            "notfound",
            (),
            "has no /v1/models (HTTP 404) (give the server's root URL (e.g. http://host:8000), "
            "where /v1/models and /metrics answer)",
        ),
        (
            "html",
            (),
            "answered /v1/models with something that is not JSON ('<html>welcome</html>') (give the "
            "server's root URL (e.g. http://host:8000), where /v1/models and /metrics answer)",
        ),
        (
            "no-draft",
            (),
            "runs without a draft (its /metrics has no vllm:spec_decode_* counters) (serve it with vllm "
            "serve --speculative-config, or give it as --baseline-server)",
        ),
        ("malformed-sse", (), "failed every request at concurrency 1: malformed SSE data ('{not json')"),
        (
            "stall",
            ("--request-timeout", "0.5"),
            "failed every request at concurrency 1: no answer within 0.5s (request timeout)",
        ),
        (
            "stall",
            ("--timeout", "1"),
            "did not finish the run within 1s (raise --timeout, or give fewer prompts or levels)",
        ),
    ],
)
def test_a_bad_server_is_one_line_with_exit_code_3(mode: str, extra: tuple[str, ...], message: str) -> None:
    with FakeServer(k=None if mode == "no-draft" else 3, mode=mode) as srv:
        res = _smoke("--server", srv.url, *FAST, "--concurrency", "1", *extra)
    assert (res.exit_code, res.stderr.splitlines()[-1]) == (3, f"Error: the server at {srv.url} {message}")


def test_nothing_listening() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    res = _smoke("--server", url, *FAST)
    assert (res.exit_code, res.stderr) == (
        3,
        f"Error: the server at {url} is not reachable (All connection attempts failed) "
        "(start the server or fix the host and port)\n",
    )


def test_a_baseline_with_a_draft_is_refused() -> None:
    with FakeServer() as srv, FakeServer() as base:
        res = _smoke("--server", srv.url, "--baseline-server", base.url, *FAST)
    assert (res.exit_code, res.stderr.splitlines()[-1]) == (
        3,
        f"Error: the server at {base.url} runs with a draft (k=3) but is the baseline (the baseline serves the same "
        "target without vllm serve --speculative-config)",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("d1", "--server", "http://h:1"), "with --server, drop DRAFT arguments: the server holds the models"),
        (("--server", "http://h:1", "--target", "t"), "with --server, drop --target: the server holds the models"),
        (
            ("--server", "http://h:1", "-k", "4"),
            "with --server, drop --num-speculative-tokens (the server's "
            "--speculative-config sets k): the server holds the models",
        ),
        (("d1", "--target", "t", "--baseline-server", "http://h:1"), "--label and --baseline-server go with --server"),
        (("--server", "ftp://h:1"), "--server: 'ftp://h:1' is not an http(s) URL (e.g. http://localhost:8000)"),
        (("--server", "http://h:1", "--label", "a", "--label", "b"), "more --label than --server values"),
    ],
)
def test_usage_errors(args: tuple[str, ...], message: str) -> None:
    res = _smoke(*args)
    assert (res.exit_code, res.stderr) == (2, f"Error: {message}\n")


def test_smoke_server_needs_no_smoke_extra() -> None:
    """The lean install measures a server: torch, transformers and vLLM cannot even be imported here."""
    import subprocess

    code = (
        "import sys\n"
        "for m in ('torch', 'transformers', 'tokenizers', 'vllm', 'matplotlib'): sys.modules[m] = None\n"
        "from eagle_convert.cli.app import main\n"
        "main(sys.argv[1:])\n"
    )
    with FakeServer(k=3, accept=2) as srv:
        res = subprocess.run(
            [sys.executable, "-c", code, "smoke", "--server", srv.url, *FAST, "--concurrency", "1", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["drafts"][0]["total"]["acceptance_length"] == 2.6667  # 9 tokens: rounds of 2, 2, 1


def test_another_engine_is_named_and_measured_for_timing_only() -> None:
    with FakeServer(k=None, owned_by="sglang") as srv, FakeServer(k=None, delay=0.002) as base:
        res = _smoke("--server", srv.url, *FAST, "--concurrency", "1")
        assert (res.exit_code, res.stderr.splitlines()[-1]) == (
            3,
            f"Error: the server at {srv.url} is not a vLLM server (sglang): it has no vllm:spec_decode_* counters, so "
            "no acceptance can be read (give --timing-only for per-user tokens/s and speedups without acceptance)",
        )
        res = _smoke(
            "--server", srv.url, "--baseline-server", base.url, *FAST, "--concurrency", "1", "--timing-only", "--json"
        )
    assert res.exit_code == 0, res.output
    [lv] = json.loads(res.stdout)["servers"][0]["levels"]
    assert lv["acceptance_length"] is None and lv["per_user_tokens_per_s"] > 0 and lv["speedup"] > 0


def test_a_tls_failure_names_the_certificate(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test's self-signed certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    with FakeServer(tls=(str(cert), str(key))) as srv:
        res = _smoke("--server", srv.url, *FAST)
    assert res.exit_code == 3
    line = res.stderr.splitlines()[-1]
    assert line.startswith(f"Error: the server at {srv.url} failed the TLS handshake (")
    assert "CERTIFICATE_VERIFY_FAILED" in line and line.endswith(
        "(check the certificate (SSL_CERT_FILE) or use http://)"
    )


def test_ctrl_c_names_the_levels_already_measured() -> None:
    """SIGINT while level 2 stalls: exit 130, the line names level 1's figure, no traceback."""
    import signal
    import subprocess
    import time

    with FakeServer(k=3, accept=2, mode="stall", stall_after=1) as srv:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eagle_convert",
                "smoke",
                "--server",
                srv.url,
                "--label",
                "s",
                *FAST,
                "--concurrency",
                "1,2",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
        deadline = time.monotonic() + 60
        while srv.requests < 2 and time.monotonic() < deadline:  # level 1 done, level 2 stalling
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "Error: interrupted (SIGINT); measured: s c=1 AL 2.67"
    assert "Traceback" not in err


def test_urls_are_normalized_and_shown_without_credentials() -> None:
    from eagle_convert.served.http import display_url, normalize_url

    assert normalize_url("localhost:8000/v1/") == "http://localhost:8000"
    assert normalize_url("https://h.example/serve/v1") == "https://h.example/serve"
    assert display_url(normalize_url("http://user:secret@h:1")) == "http://h:1"


def test_buckets_pad_with_the_servers_tokenize_and_a_server_without_it_is_named() -> None:
    with FakeServer(k=3, accept=2) as srv:
        res = _smoke("--server", srv.url, *FAST, "--concurrency", "1", "--buckets", "natural,64", "--json")
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)
        check_schema(data, "smoke-report.schema.json")
        assert data["settings"]["buckets"] == [0, 64]
        assert [(i["bucket"], i["prompt_tokens"]) for i in data["prompts"]["items"]][1] == (64, 64)
        assert [lv["bucket"] for lv in data["servers"][0]["levels"]] == [0, 64]
        res = _smoke("--server", srv.url, *FAST, "--concurrency", "1", "--buckets", "64")
        assert res.exit_code == 0, res.output
        assert "context  ~64 tok: prompts padded with neutral filler to about N tokens with the server's /tokenize" in (
            res.stdout
        )
        res = _smoke("--server", srv.url, *FAST, "--buckets", "4000")
        assert (res.exit_code, res.stderr.splitlines()[-1]) == (
            2,
            "Error: --buckets: 4000 tokens leave no room for generation (at most 247 prompt tokens fit the context "
            f"of the server at {srv.url})",
        )
    with FakeServer(tokenize=False, max_model_len=8192) as srv:
        res = _smoke("--server", srv.url, *FAST, "--buckets", "1000,4000")
    assert (res.exit_code, res.stderr.splitlines()[-1]) == (
        3,
        f"Error: the server at {srv.url} has no /tokenize (HTTP 404): context buckets are padded with the server's "
        "tokenizer (measure the prompts' own length (--buckets natural), or point --server at a vLLM server)",
    )


def test_long_context_suites_run_against_a_server() -> None:
    """Long context was refused with --server ("cut with the target's tokenizer"); it is cut on the
    server's /tokenize now, each length its own bucket, in text and JSON alike."""
    with FakeServer(k=3, accept=2, max_model_len=1024) as srv:
        args = ("--server", srv.url, "--prompts", "long-prose:300", "--limit", "1", "--max-new-tokens", "9")
        res = _smoke(*args, "--concurrency", "1", "--json")
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)
        check_schema(data, "smoke-report.schema.json")
        assert data["settings"]["buckets"] == [300] and data["prompts"]["suite"] == "long-prose:300"
        [item] = data["prompts"]["items"]
        assert item["id"] == "long-prose-300-0" and 297 <= item["prompt_tokens"] <= 300
        res = _smoke(*args, "--concurrency", "1")
    assert res.exit_code == 0, res.output
    assert "prompts  1 of long-prose:300" in res.stdout
    assert "context  ~300 tok: long-context prompts cut to about N tokens with the server's /tokenize" in res.stdout
