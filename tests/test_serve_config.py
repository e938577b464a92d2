"""The deployment's serve config (`--speculative-config`, `--max-model-len`): parsed per vLLM release,
checked against the draft (family `serve`), and handed to the engines exactly as given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from eagle_convert.cli.errors import format_error
from eagle_convert.errors import UsageError
from eagle_convert.validate.run import validate_checkpoint
from eagle_convert.vllm_model import speculative as sp
from eagle_convert.vllm_model.releases import release
from eagle_convert.vllm_model.serve_config import parse_serve_config, recorded_k
from fixtures.edits import edit_config, edit_draft, set_config

R32, R33 = release("0.32.0"), release("0.33.0")
OK = {"method": "eagle3", "num_speculative_tokens": 3}


def _parse_error(value, rel=R32, **kw) -> str:
    """The refusal as the command line says it (the library names options by keyword)."""
    with pytest.raises(UsageError) as exc:
        parse_serve_config(value, rel, **kw)
    return format_error(exc.value)


# ------------------------------------------------------------------------------- the key tables


def test_033_adds_exactly_the_six_keys_of_its_source() -> None:
    new = set(sp.accepted(sp.KEYS, R33)) - set(sp.accepted(sp.KEYS, R32))
    assert new == {
        "disable_lookahead_block_hashes",
        "draft_lm_head_quantization",
        "fly_window_size",
        "fly_entropy_threshold",
        "fly_entropy_top_k",
        "xpress_topc",
    }
    assert set(sp.accepted(sp.KEYS, R32)) <= set(sp.accepted(sp.KEYS, R33))  # 0.33 removed no key


@pytest.mark.parametrize(
    ("table", "name", "first_yes", "last_no"),
    [
        (sp.KEYS, "use_heterogeneous_vocab", "0.25.0", "0.24.0"),
        (sp.KEYS, "kv_cache_dtype", "0.26.0", "0.25.1"),
        (sp.KEYS, "disable_eagle_block_drop", "0.30.0", "0.29.0"),
        (sp.REJECTION_METHODS, "block", "0.25.0", "0.24.0"),
        (sp.REJECTION_METHODS, "fly", "0.33.0", "0.32.0"),
        (sp.METHODS, "dspark", "0.25.0", "0.24.0"),
        (sp.DRAFT_SAMPLE_METHODS, "probabilistic", "0.22.0", "0.21.0"),
    ],
)
def test_each_key_and_value_holds_from_its_first_release(table, name, first_yes, last_no) -> None:
    assert name in sp.accepted(table, release(first_yes))
    assert name not in sp.accepted(table, release(last_no))


def test_medusa_left_in_033() -> None:
    assert "medusa" in sp.accepted(sp.METHODS, R32) and "medusa" not in sp.accepted(sp.METHODS, R33)


# ------------------------------------------------------------------------------------ parsing


def test_a_json_object_a_file_and_a_dict_read_the_same(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(OK))
    from_text = parse_serve_config(json.dumps(OK), R32)
    from_file = parse_serve_config(str(path), R32)
    assert from_text is not None and from_file is not None
    assert from_text.data == from_file.data == parse_serve_config(OK, R32).data == OK  # type: ignore[union-attr]
    assert from_text.source == "--speculative-config" and from_file.source == f"--speculative-config {path}"


def test_nothing_given_is_none_and_only_max_model_len_is_a_context() -> None:
    assert parse_serve_config(None, R32) is None
    only = parse_serve_config(None, R32, max_model_len=4096)
    assert only is not None and not only.given and only.draft_context == 4096


def test_not_json_and_not_an_object_are_usage_errors(tmp_path: Path) -> None:
    assert _parse_error("method=eagle3") == (
        "--speculative-config: neither JSON (Expecting value: line 1 column 1 (char 0)) nor a JSON file "
        '(give the object vllm serve takes, e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\')'
    )
    assert _parse_error("[3]") == (
        "--speculative-config: must be a JSON object (as vllm serve --speculative-config takes), not an array"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert _parse_error(str(bad)).startswith(f"--speculative-config {bad}: not JSON (")


def test_an_033_key_is_unknown_on_032_naming_both_releases() -> None:
    assert _parse_error({"fly_window_size": 2}) == (
        "--speculative-config: unknown key 'fly_window_size' for vLLM 0.32.0: config/speculative.py "
        "SpeculativeConfig has it in vLLM 0.33.0 and later (drop it, or name the release you serve on with "
        "--vllm-version)"
    )
    assert parse_serve_config({"num_speculative_tokens": 3, "fly_window_size": 2}, R33) is not None


def test_a_misspelt_key_gets_the_close_one() -> None:
    assert _parse_error({"num_speculative_token": 3}) == (
        "--speculative-config: unknown key 'num_speculative_token' for vLLM 0.32.0 (config/speculative.py "
        "SpeculativeConfig) (did you mean 'num_speculative_tokens'?)"
    )


def test_dashed_keys_count_from_026() -> None:
    assert _parse_error({"num-speculative-tokens": 3}, release("0.25.1")) == (
        "--speculative-config: unknown key 'num-speculative-tokens' for vLLM 0.25.1 (vLLM turns '-' into '_' "
        "only from 0.26.0) (write 'num_speculative_tokens')"
    )
    parsed = parse_serve_config({"num-speculative-tokens": 3}, release("0.26.0"))
    assert parsed is not None and parsed.data == {"num_speculative_tokens": 3}


def test_keys_vllm_sets_itself_are_refused() -> None:
    assert _parse_error({"draft_model_config": {}}) == (
        "--speculative-config: 'draft_model_config' is set by vLLM itself (vLLM 0.32.0 config/speculative.py "
        "SpeculativeConfig), not by the user"
    )
    assert _parse_error({"tensor_parallel_size": 2}).startswith(
        "--speculative-config: 'tensor_parallel_size' is not a valid argument in the speculative_config"
    )


@pytest.mark.parametrize(
    ("value", "rel", "message"),
    [
        (
            {"num_speculative_tokens": 0},
            R32,
            "--speculative-config: num_speculative_tokens must be an integer >= 1, not 0 (vLLM 0.32.0)",
        ),
        (
            {"num_speculative_tokens": True},
            R32,
            "--speculative-config: num_speculative_tokens must be an integer >= 1, not true (vLLM 0.32.0)",
        ),
        ({"model": 3}, R32, "--speculative-config: model must be a string, not 3 (vLLM 0.32.0)"),
        (
            {"rejection_sample_method": "fly"},
            R32,
            '--speculative-config: rejection_sample_method "fly" is not one vLLM 0.32.0 accepts (standard, '
            "synthetic, block; 'fly' exists in vLLM 0.33.0 and later)",
        ),
        (
            {"method": "medusa"},
            R33,
            '--speculative-config: method "medusa" is not one vLLM 0.33.0 accepts (ngram, ngram_gpu, draft_model, '
            "suffix, eagle, eagle3, extract_hidden_states, dflash, ...; 'medusa' exists in vLLM up to 0.32.0)",
        ),
        (
            {"draft_lm_head_quantization": "int4"},
            R33,
            '--speculative-config: draft_lm_head_quantization "int4" is not one vLLM 0.33.0 accepts (fp8, nvfp4)',
        ),
        (
            {"num_speculative_tokens": 1, "rejection_sample_method": "fly"},
            R33,
            '--speculative-config: rejection_sample_method "fly" needs num_speculative_tokens >= 2, not 1 '
            '(vLLM 0.33.0 raises "FLy requires num_speculative_tokens to be at least 2.")',
        ),
        (
            {"num_speculative_tokens": 3, "rejection_sample_method": "fly", "fly_window_size": 3},
            R33,
            "--speculative-config: fly_window_size 3 must be smaller than num_speculative_tokens 3 (vLLM 0.33.0 "
            'raises "FLy requires fly_window_size to be smaller than num_speculative_tokens.")',
        ),
    ],
)
def test_values_the_release_refuses(value, rel, message) -> None:
    assert _parse_error(value, rel) == message


def test_the_drafts_max_model_len_cannot_pass_the_targets() -> None:
    assert _parse_error({"max_model_len": 4096}, max_model_len=2048) == (
        "--speculative-config: max_model_len 4096 is larger than --max-model-len 2048 (vLLM 0.32.0 "
        "SpeculativeConfig._maybe_override_draft_max_model_len raises: the draft's max_model_len cannot be "
        "larger than the target's)"
    )
    parsed = parse_serve_config({"max_model_len": 1024}, R32, max_model_len=2048)
    assert parsed is not None and parsed.draft_context == 1024  # longer sequences skip speculation


def test_recorded_k_is_the_speculators_proposal() -> None:
    config = {"speculators_config": {"proposal_methods": [{"speculative_tokens": 5}]}}
    assert recorded_k(config) == (5, "speculators_config.proposal_methods[0].speculative_tokens")
    assert recorded_k({}) == (None, "")


# ----------------------------------------------------------------------- the serve family


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vLLM-layout EAGLE-3 draft (reduced vocabulary) in a folder whose name guesses no method."""
    return edit_draft(tmp_path_factory.mktemp("serve") / "draft")


def _codes(draft: Path, spec, **kw) -> dict[str, str]:
    report = validate_checkpoint(draft, speculative_config=spec, **kw)
    return {f.code: f.message for f in report.findings}


def test_a_matching_config_adds_nothing_and_the_family_runs_only_when_given(plain: Path) -> None:
    with_spec = validate_checkpoint(plain, speculative_config=OK)
    assert with_spec.families_run[-1] == "serve" and with_spec.findings == []
    assert "serve" not in validate_checkpoint(plain).families_run
    assert "serve" not in validate_checkpoint(plain, serving_context=4096).families_run


def test_method_eagle_builds_eagle1(plain: Path) -> None:
    found = _codes(plain, {"method": "eagle", "num_speculative_tokens": 3})
    assert found == {
        "E901": "--speculative-config: method 'eagle': vLLM 0.32.0 builds the EAGLE-1 drafter with class "
        "EagleLlamaForCausalLMEagle3, which is never fed the target's aux hidden states (only method eagle3 is) "
        "and cannot run this EAGLE-3 draft"
    }


def test_no_method_is_guessed_from_the_model_path(plain: Path) -> None:
    found = _codes(plain, {"num_speculative_tokens": 3})
    assert found["E901"] == (
        f"--speculative-config: no method: vLLM 0.32.0 guesses it from the model path ({str(plain)!r} gives "
        "draft_model): vLLM 0.32.0 builds a standalone draft model from the draft's config "
        "(LlamaForCausalLMEagle3), which has no parameter for fc or the aux states"
    )
    # the path vLLM is given is the speculative config's model: one with eagle3 in it guesses eagle3
    assert "E901" not in _codes(plain, {"num_speculative_tokens": 3, "model": "/models/llama-eagle3"})


def test_no_k_fails_to_start(plain: Path) -> None:
    found = _codes(plain, {"method": "eagle3"})
    assert list(found) == ["E902"]
    assert 'raises ValueError ("A speculative model was provided, but `num_speculative_tokens`' in found["E902"]


def test_k_against_the_k_the_draft_records(tmp_path: Path) -> None:
    draft = edit_draft(tmp_path / "spec", "speculators-eagle3")
    assert "W903" not in _codes(draft, {**OK, "num_speculative_tokens": 3})
    found = _codes(draft, {**OK, "num_speculative_tokens": 5})
    assert found["W903"] == (
        "--speculative-config serves num_speculative_tokens 5 but the draft records 3 "
        "(speculators_config.proposal_methods[0].speculative_tokens, what `vllm serve DRAFT` would use): "
        "acceptance past position 3 was not measured for this deployment"
    )
    report = validate_checkpoint(draft, speculative_config={**OK, "num_speculative_tokens": 5})
    assert [f.impact for f in report.findings if f.code == "W903"] == ["hygiene"]


def test_lossy_rejection_is_an_error_only_where_identity_is_required(plain: Path) -> None:
    fly = {**OK, "rejection_sample_method": "fly"}
    assert list(_codes(plain, fly, vllm_version="0.33.0")) == ["W905"]
    found = _codes(plain, fly, vllm_version="0.33.0", identity_required=True)
    assert list(found) == ["E904"]
    assert found["E904"].startswith('--speculative-config: rejection_sample_method "fly" is lossy by design')
    assert found["E904"].endswith("and this check requires output identity ([output] identity)")
    assert list(_codes(plain, {**OK, "rejection_sample_method": "synthetic"}, identity_required=True)) == ["E904"]
    assert _codes(plain, {**OK, "rejection_sample_method": "block"}, identity_required=True) == {}


def test_lm_head_quantization_needs_a_shared_head(plain: Path) -> None:
    found = _codes(plain, {**OK, "draft_lm_head_quantization": "fp8"}, vllm_version="0.33.0")
    assert found == {
        "E906": "--speculative-config: draft_lm_head_quantization 'fp8' needs a draft that shares the target's "
        "lm_head, but this draft has its own (lm_head.weight maps a reduced vocabulary (128 of 256 tokens)): "
        'vLLM 0.33.0 raises ValueError ("draft_lm_head_quantization needs a drafter that shares the target '
        'lm_head."; v1/worker/gpu/spec_decode/eagle/utils.py)'
    }


def test_quantization_against_the_drafts_own(plain: Path, tmp_path: Path) -> None:
    assert list(_codes(plain, {**OK, "quantization": "fp8"})) == ["W908"]
    quantized = edit_config(edit_draft(tmp_path / "q"), quantization_config={"quant_method": "compressed-tensors"})
    found = _codes(quantized, {**OK, "quantization": "fp8"})
    assert found["E907"] == (
        "--speculative-config: quantization 'fp8' but the draft's quantization_config says 'compressed-tensors': "
        "vLLM 0.32.0 raises ValueError (config/model.py ModelConfig._verify_quantization: the method in the model "
        "config does not match the `quantization` argument)"
    )
    assert "E907" not in _codes(quantized, {**OK, "quantization": "compressed-tensors"})


def test_the_context_goes_to_the_context_rule_once(plain: Path) -> None:
    by_spec = _codes(plain, {**OK, "max_model_len": 32768})
    assert by_spec["W310"].startswith(
        "max_position_embeddings is 2048 but the serving context is 32768 (the speculative config's max_model_len)"
    )
    by_flag = _codes(plain, OK, serving_context=32768)
    assert by_flag["W310"].startswith(
        "max_position_embeddings is 2048 but the serving context is 32768 (--max-model-len)"
    )
    # the draft's own max_model_len caps where it drafts: below its max_position_embeddings nothing is past it
    assert "W310" not in _codes(plain, {**OK, "max_model_len": 2048}, serving_context=32768)


# ---------------------------------------------------------------------------------------- CLI


def test_cli_validate_takes_the_config_and_its_errors_exit_2(plain: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["validate", str(plain), "--speculative-config", json.dumps(OK)])
    assert ok.exit_code == 0, ok.output
    assert "files, keys, shapes, config, vocab, producer, serve" in ok.stdout
    bad = runner.invoke(main, ["validate", str(plain), "--speculative-config", '{"fly_window_size": 2}'])
    assert bad.exit_code == 2
    assert bad.output == (
        "Error: --speculative-config: unknown key 'fly_window_size' for vLLM 0.32.0: config/speculative.py "
        "SpeculativeConfig has it in vLLM 0.33.0 and later (drop it, or name the release you serve on with "
        "--vllm-version)\n"
    )
    fails = runner.invoke(
        main,
        ["validate", str(plain), "--json", "--speculative-config", '{"method": "eagle", "num_speculative_tokens": 3}'],
    )
    assert fails.exit_code == 1
    data = json.loads(fails.stdout)
    assert [f["code"] for f in data["findings"]] == ["E901"]
    assert data["serve"] == {
        "speculative_config": {"method": "eagle", "num_speculative_tokens": 3},
        "max_model_len": None,
    }


def test_cli_validate_on_033_accepts_its_keys(plain: Path) -> None:
    res = CliRunner().invoke(
        main,
        [
            "validate",
            str(plain),
            "--vllm-version",
            "0.33.0",
            "--speculative-config",
            json.dumps({**OK, "rejection_sample_method": "fly", "fly_window_size": 2}),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "W905" in res.stdout and res.stdout.splitlines()[-1] == "OK: 0 error(s), 1 warning(s), 0 info"


def test_set_config_edits_keep_the_draft_readable(tmp_path: Path) -> None:
    # n_predict (an MTP-style default k) makes a missing num_speculative_tokens legal
    draft = edit_draft(tmp_path / "np", config=set_config(n_predict=3))
    assert "E902" not in _codes(draft, {"method": "eagle3"})


def test_cli_matrix_reads_the_config_per_release(plain: Path) -> None:
    spec = json.dumps({**OK, "rejection_sample_method": "fly", "fly_window_size": 2})
    res = CliRunner().invoke(
        main, ["validate", str(plain), "--vllm-version", "all", "--json", "--speculative-config", spec]
    )
    rows = {r["release"]: r for r in json.loads(res.stdout)["matrix"]}
    fly = ("0.33.0", "0.34.0")
    assert all(rows[v]["verdict"] == "served differently" and rows[v]["codes"] == ["W905"] for v in fly)
    assert all(rows[v]["verdict"] == "fails to load" and rows[v]["codes"] == ["E911"] for v in rows if v not in fly)
    refused = next(f for f in rows["0.32.0"]["findings"] if f["code"] == "E911")
    assert refused["message"] == (
        "--speculative-config: unknown key 'fly_window_size' for vLLM 0.32.0: config/speculative.py "
        "SpeculativeConfig has it in vLLM 0.33.0 and later"
    )
    bad = CliRunner().invoke(main, ["validate", str(plain), "--vllm-version", "all", "--speculative-config", "[1]"])
    assert bad.exit_code == 2  # not an object for any release: a usage error, not a row
    assert bad.output == (
        "Error: --speculative-config: must be a JSON object (as vllm serve --speculative-config takes), not an array\n"
    )


# ------------------------------------------------------------- the engines run these settings

SERVED = {
    "method": "eagle3",
    "num_speculative_tokens": 4,
    "rejection_sample_method": "block",
    "max_model_len": 512,
    "draft_sample_method": "greedy",
}


def test_the_engine_speculative_config_is_the_users_with_the_draft_as_model() -> None:
    from eagle_convert.vllm_model.serve_config import speculative_config_for

    assert speculative_config_for("/d", 3) == {"method": "eagle3", "num_speculative_tokens": 3, "model": "/d"}
    user = {**SERVED, "model": "org/somewhere-else"}
    assert speculative_config_for("/d", 4, user) == {**SERVED, "model": "/d"}
    parsed = parse_serve_config(user, R32)
    assert parsed is not None and parsed.engine_config("/d", 4) == {**SERVED, "model": "/d"}


class _Capture:
    """Stands in for the worker: keeps each request, answers as a worker does."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    def __call__(self, payload: dict, *, timeout_s: float) -> dict:
        self.requests.append(payload)
        if payload["op"] == "load_check":
            return {"results": []}
        return {"ok": True, "started": True, "passes": {}, "timings": {}, "vllm_version": "0.32.0"}


def test_session_requests_and_llm_kwargs_carry_exactly_the_served_keys(tmp_path: Path) -> None:
    from eagle_convert.vllm import EngineSession, PassSpec
    from eagle_convert.vllm.session_worker import _engine_kwargs

    draft, target = tmp_path / "draft", tmp_path / "target"
    session = EngineSession(share=False)
    capture = _Capture()
    session.request = capture  # type: ignore[method-assign]
    session.engine(
        target, draft, [[1, 2]], [PassSpec("main")], num_speculative_tokens=4, max_model_len=1024, speculative=SERVED
    )
    session.load_check([draft], target, num_speculative_tokens=4, speculative=SERVED)
    engine_req, load_req = capture.requests
    expected = {**SERVED, "model": str(draft.resolve())}
    assert engine_req["speculative_config"] == expected
    kwargs = _engine_kwargs(engine_req, fields={"per_request_spec_decode_metrics"})
    assert kwargs["speculative_config"] == expected
    assert kwargs["max_model_len"] == 1024 and kwargs["model"] == str(target.resolve())
    assert load_req["speculative"] == SERVED and load_req["num_speculative_tokens"] == 4
    # without a serve config: eagle3 at k, as before
    session.engine(target, draft, [[1]], [PassSpec("main")], num_speculative_tokens=2)
    assert capture.requests[-1]["speculative_config"] == {
        "method": "eagle3",
        "num_speculative_tokens": 2,
        "model": str(draft.resolve()),
    }
    session.engine(target, None, [[1]], [PassSpec("main")], speculative=SERVED)  # the target alone
    assert capture.requests[-1]["speculative_config"] is None
    assert "speculative_config" not in _engine_kwargs(capture.requests[-1], fields=set())


def test_check_engines_key_their_cache_on_the_served_keys(tmp_path: Path) -> None:
    from eagle_convert.measure.passes import Engines
    from eagle_convert.vllm import EngineRun, PassResult, PassSpec

    calls: list[dict] = []

    class Session:
        worker_starts = 0

        def engine(self, target, draft, prompts, passes, **kw):
            calls.append(kw)
            res = PassResult([0], [[1]], None, 1, 4, 4, [1, 1, 1, 1], 0.1, None)
            return EngineRun(str(draft), "0.32.0", {p.name: res for p in passes})

    engines = Engines({}, Session())  # type: ignore[arg-type]
    args = dict(k=4, max_new_tokens=8, max_model_len=512, seed=0, timeout_s=60)
    spec = [PassSpec("main")]
    engines.passes("candidate", tmp_path, tmp_path / "d", [[1]], spec, speculative=SERVED, **args)
    engines.passes("candidate", tmp_path, tmp_path / "d", [[1]], spec, speculative=SERVED, **args)  # cached
    engines.passes("candidate", tmp_path, tmp_path / "d", [[1]], spec, **args)  # other settings: runs
    assert [c["speculative"] for c in calls] == [SERVED, None]
    assert calls[0]["num_speculative_tokens"] == 4 and calls[0]["max_model_len"] == 512


def test_engine_context_is_the_served_one() -> None:
    only_flag = parse_serve_config(None, R32, max_model_len=4096)
    assert only_flag is not None and only_flag.engine_max_model_len(300) == 4096
    with pytest.raises(UsageError, match=r"`max_model_len=256` is shorter than the longest prompt plus"):
        only_flag = parse_serve_config(None, R32, max_model_len=256)
        assert only_flag is not None
        only_flag.engine_max_model_len(300)
    own = parse_serve_config({"max_model_len": 1024}, R32)
    assert own is not None and own.engine_max_model_len(300) == 1024  # vLLM refuses a draft length above the target's


# ------------------------------------------------------------------------------- check's CLI


def _check(*args: object):
    return CliRunner().invoke(main, ["check", *map(str, args)])


def _target(out: Path) -> Path:
    """A target config.json matching the fixture drafts (all the static stage reads)."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "vocab_size": 256,
        "num_hidden_layers": 8,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
    }
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def test_cli_check_refuses_a_config_the_release_refuses(plain: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = _check(plain, "--speculative-config", '{"fly_window_size": 2}')
    assert res.exit_code == 2
    assert res.output == (
        "Error: --speculative-config: unknown key 'fly_window_size' for vLLM 0.32.0: config/speculative.py "
        "SpeculativeConfig has it in vLLM 0.33.0 and later (drop it, or name the release you serve on with "
        "--vllm-version)\n"
    )


def test_cli_check_fails_static_on_the_serve_config(plain: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = _check(plain, "--json", "--speculative-config", '{"method": "eagle", "num_speculative_tokens": 3}')
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["stopped_after"] == "static" and data["checks"][0]["details"]["codes"] == ["E901"]
    assert data["serve"] == {
        "speculative_config": {"method": "eagle", "num_speculative_tokens": 3},
        "max_model_len": None,
    }
    (tmp_path / "eagle-check.toml").write_text("[engine]\nload = false\n")  # the static stages only
    ok = _check(plain, "--json", "--speculative-config", json.dumps(OK), "--max-model-len", "2048")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["serve"]["max_model_len"] == 2048


def test_cli_check_max_model_len_reaches_the_context_rule(plain: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = _check(plain, "--json", "--max-model-len", "32768", "--keep-going")
    found = [c for c in json.loads(res.stdout)["checks"] if c["stage"] == "static"]
    assert any("W310" in c["details"].get("codes", []) for c in found), found
    assert any("serving context is 32768 (--max-model-len)" in c["message"] for c in found)


def test_cli_check_lossy_sampling_with_identity_is_an_error(plain: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    policy = tmp_path / "identity.toml"
    policy.write_text("[acceptance]\n[output]\nidentity = true\n")
    spec = json.dumps({**OK, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0})
    res = _check(plain, "--json", "--target", _target(tmp_path / "t"), "--policy", policy, "--speculative-config", spec)
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    assert data["stopped_after"] == "static" and data["engine_starts"] == 0
    assert data["checks"][0]["details"]["codes"] == ["E904"]


def test_cli_check_the_served_k_must_be_the_policys(plain: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    policy = tmp_path / "k.toml"
    policy.write_text("[acceptance]\nnum_speculative_tokens = 3\n")
    res = _check(
        plain,
        "--target",
        _target(tmp_path / "t"),
        "--policy",
        policy,
        "--speculative-config",
        json.dumps({**OK, "num_speculative_tokens": 5}),
    )
    assert res.exit_code == 2
    assert res.output == (
        f"Error: --speculative-config num_speculative_tokens is 5 but {policy}: [acceptance] num_speculative_tokens "
        "is 3: check measures the k you serve (make them equal, or drop one)\n"
    )
    floors = tmp_path / "floors.toml"
    floors.write_text("[acceptance]\nmin_per_position = [0.5, 0.4, 0.3]\n")
    res = _check(
        plain,
        "--target",
        _target(tmp_path / "t"),
        "--policy",
        floors,
        "--speculative-config",
        json.dumps({**OK, "num_speculative_tokens": 2}),
    )
    assert res.exit_code == 2
    assert res.output == (
        f"Error: {floors}: [acceptance] min_per_position has 3 floors but --speculative-config "
        "num_speculative_tokens is 2 (one floor per draft position)\n"
    )


@pytest.mark.vllm  # the engine stages need vLLM installed
def test_cli_check_keys_of_the_release_checked_must_run_on_the_installed_one(
    plain: Path, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    policy = tmp_path / "acc.toml"
    policy.write_text("[acceptance]\n")
    spec = json.dumps({**OK, "rejection_sample_method": "fly"})
    args = ("--target", _target(tmp_path / "t"), "--vllm-version", "0.33.0", "--speculative-config", spec)
    res = _check(plain, "--policy", policy, *args)
    assert res.exit_code == 2
    assert res.output.startswith(
        'Error: --speculative-config: rejection_sample_method "fly" is not one vLLM 0.32.0 accepts'
    )
    assert res.output.endswith("; the engine stages run the installed vLLM\n")
    # without engine stages the 0.33.0 verdict needs no 0.33.0 engine
    static_only = tmp_path / "static.toml"
    static_only.write_text("[engine]\nload = false\n")
    res = _check(plain, "--json", "--policy", static_only, *args)
    assert res.exit_code == 1
    errors, warnings = json.loads(res.stdout)["checks"][:2]
    assert errors["details"]["codes"] == [] and warnings["details"]["codes"] == ["W905"]


# ------------------------------------------------------------------------------- smoke's CLI


def _smoke(*args: object):
    return CliRunner().invoke(main, ["smoke", "./draft", "--target", "./target", *map(str, args)])


def test_cli_smoke_takes_k_from_the_config_once() -> None:
    res = _smoke("--engine", "reference", "-k", "2", "--speculative-config", '{"num_speculative_tokens": 4}')
    assert res.exit_code == 2
    assert res.output == (
        "Error: --num-speculative-tokens 2 but --speculative-config num_speculative_tokens is 4 (give k once)\n"
    )


def test_cli_smoke_reference_engine_follows_only_method_and_k() -> None:
    res = _smoke("--engine", "reference", "--speculative-config", json.dumps(SERVED))
    assert res.exit_code == 2
    assert res.output == (
        "Error: --speculative-config: the reference engine drafts as method eagle3 at num_speculative_tokens "
        "only; rejection_sample_method needs --engine vllm\n"
    )
    res = _smoke("--engine", "reference", "--speculative-config", '{"method": "eagle", "num_speculative_tokens": 3}')
    assert res.exit_code == 2 and "only; method 'eagle' needs --engine vllm" in res.output


def test_smoke_library_k_from_the_config() -> None:
    """k is decided once, by `MeasureOptions.resolve`: the config's, else the asked one, else 3."""
    pytest.importorskip("torch")
    from eagle_convert.measure import MeasureOptions
    from eagle_convert.vllm_model import default_release

    rel = default_release()

    m = MeasureOptions(engine="reference", speculative_config={"num_speculative_tokens": 5}).resolve("smoke", rel)
    assert m.k == 5 and m.serve is not None and m.serve.data == {"num_speculative_tokens": 5}
    assert m.served == {"num_speculative_tokens": 5} and m.settings("t")["k"] == 5
    plain = MeasureOptions(engine="reference").resolve("smoke", rel)
    assert (plain.serve, plain.k, plain.served) == (None, 3, None)
    assert MeasureOptions(engine="reference", k=2, speculative_config={"method": "eagle3"}).resolve("smoke", rel).k == 2
    with pytest.raises(UsageError, match=r"^`k=2` but `speculative_config` num_speculative_tokens is 4"):
        MeasureOptions(engine="reference", k=2, speculative_config={"num_speculative_tokens": 4}).resolve("smoke", rel)


def test_the_report_heads_name_the_serve_config(plain: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = '{"method": "eagle3", "num_speculative_tokens": 3}'
    line = (
        'serve config  {"method": "eagle3", "num_speculative_tokens": 3} (--speculative-config); --max-model-len 2048'
    )
    flat = " ".join(line.split())  # piped at 100 columns, the head's value wraps between words
    res = CliRunner().invoke(main, ["validate", str(plain), "--speculative-config", spec, "--max-model-len", "2048"])
    assert res.exit_code == 0 and flat in " ".join(res.stdout.split()), res.output
    (tmp_path / "eagle-check.toml").write_text("[engine]\nload = false\n")  # the static stages only
    res = _check(plain, "--speculative-config", spec, "--max-model-len", "2048")
    assert res.exit_code == 0 and flat in " ".join(res.stdout.split()), res.output


def test_parallel_drafting_against_the_drafts_mask_hidden(plain: Path, tmp_path: Path) -> None:
    import torch

    from fixtures.edits import put_tensor

    peagle = edit_draft(
        tmp_path / "pe", tensors=put_tensor("mask_hidden", lambda s: torch.zeros(1, 192, dtype=torch.bfloat16))
    )
    found = _codes(peagle, OK)
    assert found["W909"] == (
        "the draft ships mask_hidden (a parallel-drafting P-EAGLE draft) but --speculative-config does not set "
        'parallel_drafting: vLLM 0.32.0 skips it ("mask_hidden found in weights but model is not configured for '
        'parallel drafting") and drafts one token per forward pass, not as the draft was trained'
    )
    assert "W909" not in _codes(peagle, {**OK, "parallel_drafting": True})
    assert _codes(plain, {**OK, "parallel_drafting": True}) == {
        "E910": "--speculative-config sets parallel_drafting but the draft has no mask_hidden: vLLM 0.32.0 raises "
        'ValueError ("mask_hidden not found in weights but model is configured for parallel drafting"; '
        "model_executor/models/llama_eagle3.py Eagle3LlamaForCausalLM.load_weights)"
    }


@pytest.mark.vllm  # validate --load vllm needs vLLM installed
def test_validate_engine_check_loads_with_the_served_keys(plain: Path, tmp_path: Path, monkeypatch) -> None:
    import eagle_convert.vllm.strict_load as vllm_check
    from eagle_convert.vllm.load_report import EngineReport

    seen: list[dict] = []

    def fake(draft, target, **kw):
        seen.append(kw)
        return EngineReport(True, "0.32.0", None)

    monkeypatch.setattr(vllm_check, "check_with_vllm", fake)
    target = _target(tmp_path / "t")
    validate_checkpoint(plain, target=target, load="vllm", speculative_config={**SERVED, "max_model_len": 1024})
    validate_checkpoint(plain, target=target, load="vllm")
    assert seen[0] == {
        "timeout_s": 600,
        "speculative": {**SERVED, "max_model_len": 1024},
        "num_speculative_tokens": 4,
        "max_model_len": 1024,
    }
    assert seen[1] == {"timeout_s": 600}  # no serve config: the load check's own settings
