"""The pre-commit hook through `pre-commit try-repo` on a temporary git repository, and the GitHub
Action's check step run as the action runs it: its script with the inputs as environment variables."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "action-check.sh"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def drafts(tmp_path_factory: pytest.TempPathFactory, built_fixtures) -> dict[str, Path]:
    from fixtures.edits import drop_tensor

    base = tmp_path_factory.mktemp("integration-drafts")
    good = shutil.copytree(built_fixtures("vllm-eagle3"), base / "good")
    broken = base / "broken"
    drop_tensor(good, broken, "down_proj")
    return {"good": good, "broken": broken}


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def test_precommit_hook_through_try_repo(drafts, tmp_path: Path) -> None:
    if shutil.which("pre-commit", path=str(BIN)) is None:
        pytest.skip("pre-commit is not installed (the test extra installs it)")
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["eagle-convert-validate", "eagle-convert-validate-system"]
    assert {h["entry"] for h in hooks} == {"eagle-convert-pre-commit"}
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shutil.copytree(drafts["good"], repo / "drafts" / "good")
    shutil.copytree(drafts["broken"], repo / "drafts" / "broken")
    (repo / "README.md").write_text("drafts\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "drafts")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PRE_COMMIT_HOME": str(tmp_path / "pc"),
        "HF_HUB_OFFLINE": "1",
    }

    def try_repo(*args: str) -> subprocess.CompletedProcess:
        # The -system hook runs the eagle-convert-pre-commit installed here; eagle-convert-validate (language:
        # python) would build its own virtualenv with torch-free eagle-convert from the hook repository.
        return subprocess.run(
            [str(BIN / "pre-commit"), "try-repo", str(ROOT), "eagle-convert-validate-system", *args],
            cwd=repo,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    res = try_repo("--all-files")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert f"FAIL {repo / 'drafts' / 'broken'}: E101 missing-tensor" in out
    assert f"ok   {repo / 'drafts' / 'good'}: EAGLE-3, 0 warning(s)" in out
    assert "1 draft folder(s) failed validation" in out
    assert "README.md" not in out.split("eagle-convert validate")[-1]  # not a draft: never validated
    res = try_repo("--files", "drafts/good/config.json", "drafts/good/model.safetensors", "README.md")
    assert res.returncode == 0, res.stdout + res.stderr


def test_draft_folders_of_changed_files(tmp_path: Path) -> None:
    from eagle_convert.check.changed import draft_folders

    (tmp_path / "d" / "model" / "consolidated").mkdir(parents=True)
    (tmp_path / "d" / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"line-length": 100}')  # a config.json that is no model
    files = ["d/model/consolidated/model.safetensors", "d/config.json", "other/config.json", "README.md"]
    assert draft_folders(files, root=tmp_path) == [(tmp_path / "d").resolve()]


def _action_step_env() -> dict[str, str]:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    [step] = [s for s in action["runs"]["steps"] if s.get("id") == "check"]
    assert step["run"] == 'bash "${{ github.action_path }}/scripts/action-check.sh"'
    return step["env"]


def test_action_inputs_reach_the_script() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    env = _action_step_env()
    script = SCRIPT.read_text()
    for var, expr in env.items():
        name = expr.removeprefix("${{ inputs.").removesuffix(" }}")
        assert name in action["inputs"] and var == "INPUT_" + name.upper(), var
        assert f"${{{var}" in script, var  # the script reads it
    assert action["inputs"]["draft"]["required"] is True
    assert set(action["outputs"]) == {"passed", "exit-code", "junit"}
    upload = action["runs"]["steps"][-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"].startswith("always()")
    workflow = yaml.safe_load((ROOT / "examples" / "workflow.yml").read_text())
    uses = [s for s in workflow["jobs"]["check"]["steps"] if "eagle-convert" in str(s.get("uses", ""))]
    assert uses and set(uses[0]["with"]) <= set(action["inputs"])


def _run_action(tmp_path: Path, **inputs: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    out, step = tmp_path / "gh-output", tmp_path / "gh-summary"
    out.write_text("")
    env = {
        **os.environ,
        "GITHUB_OUTPUT": str(out),
        "GITHUB_STEP_SUMMARY": str(step),
        "HF_HUB_OFFLINE": "1",
        "EAGLE_CONVERT": f"{sys.executable} -m eagle_convert.cli.app",
    }
    env.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
    res = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return res, outputs


def test_action_script_pass_fail_and_usage(drafts, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[static]\nallow_warnings = []\n[engine]\nload = false\n")
    res, outputs = _run_action(tmp_path, draft=str(drafts["good"]), policy=str(policy), extra="--keep-going --json")
    assert res.returncode == 0, res.stderr
    assert outputs == {"junit": "eagle-check.xml", "summary": "eagle-check.md", "exit-code": "0", "passed": "true"}
    assert f"--policy {policy} --keep-going --json" in res.stderr  # the command line, echoed
    suite = ET.parse(tmp_path / "eagle-check.xml").getroot().find("testsuite")
    assert suite.get("failures") == "0"
    assert (tmp_path / "gh-summary").read_text().startswith("## eagle-convert check: PASS ✅")

    res, outputs = _run_action(tmp_path, draft=str(drafts["broken"]), junit="out/broken.xml")
    assert res.returncode == 1 and outputs["passed"] == "false" and outputs["exit-code"] == "1"
    assert "::error::eagle-convert check failed" in res.stderr
    # E101, and the strict load the default policy asks for: not run, no --target
    assert ET.parse(tmp_path / "out" / "broken.xml").getroot().find("testsuite").get("failures") == "2"

    res, outputs = _run_action(tmp_path, draft="")
    assert res.returncode == 2 and "the 'draft' input is required" in res.stderr
    res, outputs = _run_action(tmp_path, draft=str(drafts["good"]), policy=str(tmp_path / "missing.toml"))
    assert res.returncode == 2 and outputs["exit-code"] == "2" and "could not run (exit 2)" in res.stderr


def test_precommit_labels_each_finding_by_what_it_does(built_fixtures, tmp_path: Path) -> None:
    """Errors `FAIL`; warnings `warn`, or `FAIL` under --strict unless the policy allows their code."""
    from click.testing import CliRunner

    from eagle_convert.cli.precommit import precommit_cmd

    nemo, specforge = built_fixtures("nemo-eagle3"), built_fixtures("specforge-eagle3")
    res = CliRunner().invoke(precommit_cmd, [str(nemo / "config.json"), str(specforge / "config.json")])
    assert res.exit_code == 1
    assert _marks(res.stdout) == [
        ("FAIL", "E103"),
        ("FAIL", "E301"),
        ("warn", "W307"),
        ("warn", "W320"),
        ("warn", "W307"),
        ("warn", "W323"),
        ("warn", "W603"),  # SpecForge's eagle_config ids are layer outputs: V1 taps each one lower
        ("ok  ", "EAGLE-3,"),
    ]
    assert res.stdout.splitlines()[-1] == f"ok   {specforge.resolve()}: EAGLE-3, 3 warning(s)"
    policy = tmp_path / "eagle-check.toml"
    policy.write_text('[static]\nallow_warnings = ["W307"]\n')
    res = CliRunner().invoke(precommit_cmd, ["--strict", "--policy", str(policy), str(specforge / "config.json")])
    assert res.exit_code == 1
    assert _marks(res.stdout) == [("warn", "W307"), ("FAIL", "W323"), ("FAIL", "W603")]


def _marks(out: str) -> list[tuple[str, str]]:
    """(label, the finding's code or the summary's first word) per line of the hook's output."""
    return [(line[:4], line.split(": ")[1].split()[0]) for line in out.splitlines()]
