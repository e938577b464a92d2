"""How the command line names the library's options in its error lines: one table, option -> flag.

A library error names an option of the call by its keyword (`EagleConvertError.options`, written
`{name}` or `{name=value}` in the message); `str(exc)` spells it as the keyword, and this module
spells it as the flag that sets it: `{force}` -> `--force`, `{layout=speculators}` ->
`--layout speculators`. A name spelled differently by one command is keyed `command:name`
(`validate` passes its `--load` to the library's `engine`). A name missing from the table is
spelled `--name-with-dashes`; tests/test_cli_errors.py checks that every option a library error
names is in the table.
"""

from __future__ import annotations

from eagle_convert.errors import EagleConvertError, Spelling

__all__ = ["FLAGS", "cli_spelling", "format_error"]

FLAGS: dict[str, str] = {
    "allow_invalid": "--allow-invalid",
    "api_key": "--api-key",
    "aux_layer_ids": "--aux-layer-ids",
    "baseline": "--baseline",
    "baseline_server": "--baseline-server",
    "buckets": "--buckets",
    "cache": "--cache",
    "capture": "--capture",
    "categories": "--category",
    "chat_template": "--chat-template",
    "concurrency": "--concurrency",
    "continuation_tokens": "--continuation-tokens",
    "cross_check": "--cross-check",
    "distributed_executor_backend": "--distributed-executor-backend",
    "drift_depth": "--drift-depth",
    "serve_for": "--for",
    "dry_run": "--dry-run",
    "engine": "--engine",
    "exclusive": "--exclusive",
    "eval_every": "--eval-every",
    "finetune_from": "--finetune-from",
    "force": "--force",
    "init": "--init",
    "k": "--num-speculative-tokens",
    "label": "--label",
    "layout": "--layout",
    "link": "--link",
    "max_len": "--max-len",
    "max_failed": "--max-failed",
    "max_model_len": "--max-model-len",
    "max_new_tokens": "--max-new-tokens",
    "nproc": "--nproc",
    "out": "--out",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "policy": "--policy",
    "prompts": "--prompts",
    "request_timeout": "--request-timeout",
    "server": "--server",
    "serve_config": "--serve-config",
    "shard_size": "--shard-size",
    "speculative_config": "--speculative-config",
    "target": "--target",
    "timeout": "--timeout",
    "timing_only": "--timing-only",
    "tensor_parallel_size": "--tensor-parallel-size",
    "train_prompts": "--train-prompts",
    "ttt_steps": "--ttt-steps",
    "vllm_version": "--vllm-version",
    "validate:engine": "--load",
    "validate:engine_timeout_s": "--load-timeout",
}


def flag(name: str, command: str | None = None) -> str:
    """The flag that sets the library option `name` in `command`."""
    return FLAGS.get(f"{command}:{name}") or FLAGS.get(name) or "--" + name.replace("_", "-")


def cli_spelling(command: str | None) -> Spelling:
    """A `Spelling` naming each option as `command`'s flag (`--layout speculators`)."""

    def spell(name: str, value: str | None) -> str:
        return flag(name, command) if value is None else f"{flag(name, command)} {value}"

    return spell


def format_error(exc: EagleConvertError, command: str | None = None) -> str:
    """The error's message and hint as the command line says them (flags, not keywords).

    Args:
        exc: The library error.
        command: The command that raised it (`validate`), for the names it spells its own way.

    Returns:
        `message (hint)` with every option the error names spelled as a flag.
    """
    return exc.render(cli_spelling(command))
