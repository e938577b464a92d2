"""The model card's serving sections: the `vllm serve` line, vLLM's releases, SGLang's and TensorRT-LLM's.

The commands come from `engines.serve_command` (one writer of every engine's command, checked against
each engine's argument parser); the card shows them at `NUM_SPECULATIVE_TOKENS`.
"""

from __future__ import annotations

from typing import Any

from eagle_convert.vllm_model import TESTED_VERSION

NUM_SPECULATIVE_TOKENS = 3


def serve_command(target: str | None, model_ref: str, k: int = NUM_SPECULATIVE_TOKENS) -> str:
    """The one-line `vllm serve` that speculates with this draft (`engines.serve_command`)."""
    from eagle_convert.engines import Draft
    from eagle_convert.engines import serve_command as engine_command

    return engine_command(Draft({}, model_ref, target, k), "vllm").command


def engine_lines(config: dict[str, Any], target: str | None, model_ref: str, engine: str) -> list[str]:
    """The card's section for serving on SGLang or TensorRT-LLM: the command, the YAML it names, the notes."""
    from eagle_convert.engines import Draft
    from eagle_convert.engines import serve_command as engine_command

    cmd = engine_command(Draft(config, model_ref, target, NUM_SPECULATIVE_TOKENS), engine)
    lines = ["", f"## Serve with {cmd.title}", "", "```bash", cmd.command, "```"]
    if cmd.config_text is not None:
        lines += ["", f"`{cmd.config_file}`:", "", "```yaml", cmd.config_text.rstrip("\n"), "```"]
    lines += [
        "",
        f"Checked against {cmd.label}'s argument parser; `eagle-convert validate DRAFT --for {engine}` "
        "gives its verdict.",
    ]
    lines += [f"Note: {n}." for n in cmd.notes]
    return lines


def serving_lines(serving: str | None) -> list[str]:
    """Which vLLM releases serve the draft as trained, and the check to run for the one deployed."""
    check = (
        "Before serving, `eagle-convert validate DRAFT --target TARGET --vllm-version X.Y.Z` checks it for the "
        "release you run and against the target"
    )
    if serving is None:
        return [f"{check}; `--vllm-version all` lists which vLLM releases serve it as trained."]
    return [
        f"**vLLM releases**: {serving}. This is eagle-convert's static verdict for each release, read from "
        f"vLLM's source (only vLLM {TESTED_VERSION} was also run). {check}."
    ]
