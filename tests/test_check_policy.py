"""eagle-check.toml: discovery, defaults, and one exact line (exit 2) for every kind of bad policy."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import tomllib
from click.testing import CliRunner

from eagle_convert.check.policy import POLICY_FILE, load_policy, validate_policy
from eagle_convert.cli.app import main

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "schemas" / "check-policy.schema.json").read_text())
HINT = "; schemas/check-policy.schema.json, docs/check.md)"

# (policy text, what is wrong naming the key, the fix)
BAD = [
    ("[acceptence]\nmin_acceptance_length = 2", "unknown table [acceptence]", "rename it to acceptance"),
    (
        "[acceptance]\nmin_acceptance_lenght = 2",
        "unknown key [acceptance] min_acceptance_lenght",
        "rename it to min_acceptance_length",
    ),
    (
        "[acceptance]\nfloor = 2",
        "unknown key [acceptance] floor",
        "remove it; known: prompts, categories, limit, "
        "buckets, chat_template, num_speculative_tokens, max_new_tokens, temperature, seed, min_acceptance_length, "
        "min_per_position, min_per_category, min_per_bucket, max_acceptance_length_drop, "
        "max_acceptance_length_drop_relative, timeout",
    ),
    (
        '[acceptance]\nmin_acceptance_length = "two"',
        "[acceptance] min_acceptance_length must be a number, not 'two' (string)",
        "for example min_acceptance_length = 1",
    ),
    (
        '[acceptance]\nmin_acceptance_length = "2"',
        "[acceptance] min_acceptance_length must be a number, not '2' (string)",
        "drop the quotes: min_acceptance_length = 2",
    ),
    (
        '[features]\nrequire = ["fc_nrom"]',
        "[features] require[0] must be one of 'fc_norm', 'norm_output', not 'fc_nrom'",
        'write "fc_norm"',
    ),
    (
        "[acceptance]\nmax_new_tokens = 0",
        "[acceptance] max_new_tokens must be >= 1, not 0",
        "set max_new_tokens to 1 or more",
    ),
    (
        '[static]\nallow_warnings = ["E101"]',
        "[static] allow_warnings[0] must be a warning code such as W307, not 'E101'",
        'for example allow_warnings = ["W307"]',
    ),
    (
        "[acceptance]\nmin_per_position = [0.6, 0.4, 0.3, 0.2]",
        "[acceptance] min_per_position has 4 floors but num_speculative_tokens is 3 (one floor per draft position)",
        "give 3 floor(s), or set num_speculative_tokens = 4",
    ),
    (
        "[acceptance]\nmin_per_position = [0.6, 1.5]",
        "[acceptance] min_per_position[1] must be <= 1, not 1.5",
        "set min_per_position[1] to 1 or less",
    ),
    (
        '[acceptance]\nbuckets = ["natural", 8]',
        "[acceptance] buckets[1] must be >= 16, not 8",
        "set buckets[1] to 16 or more",
    ),
    (
        '[acceptance]\nmin_per_category = "x"',
        "[acceptance] min_per_category must be a number or a table, not 'x' (string)",
        "for example min_per_category = 1 or {NAME = 1}",
    ),
    (
        "[acceptance]\nmin_per_category = {coding = 0.5}",
        "[acceptance] min_per_category coding must be >= 1, not 0.5",
        "set coding to 1 or more",
    ),
    (
        '[sampling]\ncontrol = "yes"',
        "[sampling] control must be one of 'auto', true, false, not 'yes'",
        'write one of them, e.g. control = "auto"',
    ),
    (
        "static = 3",
        "[static] must be a table, not 3 (integer)",
        "write it as a table: a line [static], then its keys under it",
    ),
    ('[engine]\nload = "yes"', "[engine] load must be true or false, not 'yes' (string)", "for example load = true"),
    (
        "[acceptance]\nmin_acceptance_length = 5",
        "[acceptance] min_acceptance_length 5 is above k + 1 = 4, the most a draft can reach",
        "set min_acceptance_length to 4 or less, or raise num_speculative_tokens",
    ),
    (
        "[features]\nmin_vllm_version = 'latest'",
        "[features] min_vllm_version must be a version such as 0.32.0, not 'latest'",
        'for example min_vllm_version = "0.32.0"',
    ),
    (
        "[sampling]\ntemperature = 0.5",
        "[sampling] temperature must be <= 0.1, not 0.5",
        "set temperature to 0.1 or less",
    ),
    (
        "[output]\ncompanion_temperature = 0",
        "[output] companion_temperature must be > 0, not 0",
        "set companion_temperature above 0",
    ),
]


@pytest.mark.parametrize("text, problem, fix", BAD, ids=[p.split(" must")[0].split(" (")[0] for _, p, _ in BAD])
def test_bad_policy_is_one_line_naming_the_key_and_the_fix(tmp_path: Path, text: str, problem: str, fix: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text + "\n")
    assert validate_policy(tomllib.loads(text)) == (problem, fix)
    res = CliRunner().invoke(main, ["check", str(tmp_path), "--policy", str(path)])
    assert (res.exit_code, res.stderr) == (2, f"Error: {path}: {problem} ({fix}{HINT}\n")
    assert res.stdout == ""
    # The schema file says the same thing (jsonschema rejects what the built-in validator rejects),
    # except the cross-key rules it cannot express (floors vs k).
    if "floors but" not in problem and "above k + 1" not in problem:
        assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(tomllib.loads(text)))
    fixed = {  # the fix, applied, is no longer this problem
        "drop the quotes": "[acceptance]\nmin_acceptance_length = 2",
        "rename it to min_acceptance_length": "[acceptance]\nmin_acceptance_length = 2",
    }.get(fix.split(":")[0] if fix.startswith("drop") else fix)
    if fixed:
        assert validate_policy(tomllib.loads(fixed)) is None


def test_toml_syntax_error_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[acceptance\n")
    res = CliRunner().invoke(main, ["check", str(tmp_path), "--policy", str(path)])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"Error: {path}: not valid TOML: ") and res.stderr.count("\n") == 1
    assert res.stderr.endswith(" (a table is a line [name], a key is name = value (https://toml.io))\n")
    res = CliRunner().invoke(main, ["check", str(tmp_path), "--policy", str(tmp_path / "nope.toml")])
    assert (res.exit_code, res.stderr) == (2, f"Error: --policy {tmp_path / 'nope.toml'}: no such file\n")


def test_tables_that_need_acceptance(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[output]\nidentity = true\n")
    res = CliRunner().invoke(main, ["check", str(tmp_path), "--policy", str(path)])
    assert (res.exit_code, res.stderr) == (
        2,
        f"Error: {path}: [output] needs an [acceptance] table (its prompts and settings) "
        "(add an [acceptance] table, or remove [output])\n",
    )
    res = CliRunner().invoke(main, ["check", str(tmp_path), "--baseline", str(tmp_path)])
    assert (res.exit_code, res.stderr) == (
        2,
        "Error: --baseline needs an [acceptance] table in the policy: the comparison runs there "
        "(add an [acceptance] table, or leave out --baseline)\n",
    )


def test_schema_is_valid_and_examples_follow_it() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    example = tomllib.loads((ROOT / "examples" / "eagle-check.toml").read_text())
    jsonschema.validate(example, SCHEMA)
    assert validate_policy(example) is None
    issue = tomllib.loads("""
[static]
allow_warnings = ["W307"]
[engine]
load = true
[features]
require = ["fc_norm", "norm_output"]
[acceptance]
prompts = "prompts.jsonl"
num_speculative_tokens = 3
max_new_tokens = 32
min_acceptance_length = 2.0
min_per_position = [0.6, 0.4, 0.3]
max_acceptance_length_drop = 0.05
""")  # the keys the issue fixed, with these names
    assert validate_policy(issue) is None


def test_discovery_defaults_and_relative_paths(tmp_path: Path) -> None:
    defaults = load_policy(cwd=tmp_path)
    assert defaults.source == "(defaults)" and defaults.data == {}
    assert defaults.get("static", "enabled") is True and defaults.get("static", "allow_warnings") == []
    assert defaults.get("engine", "load") is True  # asked unless turned off: without a target it is not run
    assert defaults.get("acceptance", "num_speculative_tokens") == 3
    (tmp_path / POLICY_FILE).write_text('[acceptance]\nprompts = "p/prompts.jsonl"\nmax_new_tokens = 16\n')
    found = load_policy(cwd=tmp_path)
    assert found.source == str(tmp_path / POLICY_FILE)
    assert found.get("acceptance", "max_new_tokens") == 16 and found.has("acceptance") and not found.has("output")
    assert found.prompts("acceptance") == "p/prompts.jsonl"  # no such file beside the policy: a suite name
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "prompts.jsonl").write_text("")
    assert found.prompts("acceptance") == str(tmp_path / "p" / "prompts.jsonl")
    assert found.get("output", "identity") is True  # the schema's default


def test_a_policy_is_frozen_and_checked_when_built(tmp_path: Path) -> None:
    from dataclasses import FrozenInstanceError

    from eagle_convert.check import Policy
    from eagle_convert.errors import UsageError

    with pytest.raises(UsageError) as err:  # the library's own Policy(...) refuses what load_policy refuses
        Policy({"acceptance": {"num_speculative_tokens": 0}}, "made.toml")
    assert err.value.message == "made.toml: [acceptance] num_speculative_tokens must be >= 1, not 0"
    assert err.value.hint == f"set num_speculative_tokens to 1 or more{HINT[:-1]}"
    with pytest.raises(FrozenInstanceError):
        Policy().source = "x"  # type: ignore[misc]


def test_the_acceptance_table_is_the_measuring_options(tmp_path: Path) -> None:
    from eagle_convert.check import Policy
    from eagle_convert.measure import NATURAL, MeasureOptions

    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "prompts.jsonl").write_text("")
    (tmp_path / POLICY_FILE).write_text(
        '[acceptance]\nprompts = "p/prompts.jsonl"\ncategories = ["qa"]\nlimit = 2\nbuckets = ["natural", 1024]\n'
        "temperature = 1\nchat_template = 'none'\n"
    )
    assert load_policy(cwd=tmp_path).acceptance == MeasureOptions(
        engine="vllm",
        prompts=str(tmp_path / "p" / "prompts.jsonl"),  # beside the policy file
        categories=("qa",),
        limit=2,
        k=None,  # not written: the served k decides, else 3 (MeasureOptions.resolve)
        max_new_tokens=32,  # the policy's default, not smoke's
        temperature=1.0,
        seed=0,
        buckets=(NATURAL, 1024),
        chat_template="none",
    )
    named = Policy({"acceptance": {"prompts": "spec-bench-sample", "num_speculative_tokens": 5}}, "t")
    assert named.acceptance is not None and (named.acceptance.prompts, named.acceptance.k) == ("spec-bench-sample", 5)
    assert Policy().acceptance is None


@pytest.mark.vllm  # the Measure is resolved for vLLM (MeasureOptions.resolve refuses it without vLLM)
def test_check_decides_k_and_the_prompts_once_before_any_stage(tmp_path: Path) -> None:
    from eagle_convert.check import Policy
    from eagle_convert.check.run import _measure
    from eagle_convert.vllm_model import default_release

    rel = default_release()  # the installed vLLM's rules, which run_check passes
    served = {"method": "eagle3", "num_speculative_tokens": 5}
    assert _measure(Policy({"acceptance": {}}, "t"), served, rel).k == 5  # the served k over the policy's default
    assert _measure(Policy({"acceptance": {"num_speculative_tokens": 4}}, "t"), None, rel).k == 4
    m = _measure(Policy(), None, rel)  # no [acceptance]: the engine load's k
    assert (m.k, m.engine, m.served) == (3, "vllm", None)
    path = tmp_path / "p.toml"
    path.write_text('[acceptance]\ncategories = ["nope"]\n')
    res = CliRunner().invoke(main, ["check", str(tmp_path), "--target", str(tmp_path), "--policy", str(path)])
    # one line, and no stage started (each stage says "check: <stage> ..." first)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr.startswith(f"Error: {path}: [acceptance] categories: no prompts in nope (available: ")
    assert res.stderr.count("\n") == 1
