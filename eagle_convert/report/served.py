"""`report --server URL`: the running deployment measured as one more stage, beside the variants.

The stage (`served`) calls `served.run_served`, `smoke --server`'s library call, with the report's
prompts (suite, categories, limit), new tokens, temperature, seed and concurrency levels (the
report's, else smoke --server's 1,4,16) and context buckets (padded with the server's `/tokenize`,
`served/buckets.py`); a server applies its own chat template, so only `--chat-template none`
reaches it. Its record is `ServedReport.to_dict()`, the
shape `smoke --server --json` prints (report.json's `served`).

Resumable like the other stages: keyed by the server URLs, labels, the settings and the sent
prompts' content. A server is not content-hashed: a redeployed server at the same URL is measured
again only when something in the key changed, or after its record (`OUT/.report/stages/served.json`)
is deleted.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from eagle_convert.errors import UsageError
from eagle_convert.measure import MeasureOptions
from eagle_convert.optionspec import to_argv
from eagle_convert.progress import OnTick
from eagle_convert.report.stages import ReportOptions, Say, command

if TYPE_CHECKING:
    from eagle_convert.measure import Suite
    from eagle_convert.report.runner import Runner

SERVED_STAGE = "served"


def check_served(opts: ReportOptions, suite: Suite) -> None:
    """Refuse served options that cannot work, before the first stage (not after the fine-tune)."""
    from eagle_convert.served import normalize_url

    if (opts.labels or opts.baseline_server) and not opts.servers:
        raise UsageError(
            "{label} and {baseline_server} go with {server}", options=("label", "baseline_server", "server")
        )
    if len(opts.labels) > len(opts.servers):
        raise UsageError("more {label} than {server} values", options=("label", "server"))
    for url in (*opts.servers, *([opts.baseline_server] if opts.baseline_server else [])):
        normalize_url(url)


def served_options(opts: ReportOptions) -> MeasureOptions:
    """What `smoke --server` is given for this report: its prompts, tokens, sampling and levels."""
    from eagle_convert.served import DEFAULT_LEVELS

    m = opts.measure
    return MeasureOptions(
        prompts=m.prompts,
        categories=m.categories,
        limit=m.limit,
        max_new_tokens=m.max_new_tokens,
        temperature=m.temperature,
        seed=m.seed,
        buckets=m.buckets,
        chat_template="none" if m.chat_template == "none" else None,
        concurrency=tuple(m.concurrency or DEFAULT_LEVELS),
    )


def served_command(opts: ReportOptions) -> str:
    """The `smoke --server` command that measures the servers as the report did (the API key from
    `OPENAI_API_KEY`, never written; URLs without user:password@)."""
    from eagle_convert.served import display_url

    args: list[str] = ["smoke"]
    for url in opts.servers:
        args += ["--server", display_url(url)]
    for label in opts.labels:
        args += ["--label", label]
    if opts.baseline_server:
        args += ["--baseline-server", display_url(opts.baseline_server)]
    return command(*args, *to_argv(served_options(opts), exclude=("engine", "k")), "--json")


def served_stage(
    r: Runner, opts: ReportOptions, suite: Suite, *, api_key: str | None, say: Say, on_tick: OnTick | None = None
) -> dict[str, Any] | None:
    """Run (or skip) the `served` stage; its `smoke --server --json` dict, None without servers."""
    if not opts.servers:
        return None
    from eagle_convert.served import ServerOptions, display_url, run_served

    mopts = served_options(opts)
    key = {
        "servers": [display_url(u) for u in opts.servers],
        "labels": list(opts.labels),
        "baseline_server": display_url(opts.baseline_server) if opts.baseline_server else None,
        "settings": {k: v for k, v in vars(mopts).items() if k not in ("engine", "k", "prompts")},
    }

    def body() -> tuple[dict[str, Any], str]:
        rep = run_served(
            opts.servers,
            mopts,
            ServerOptions(api_key=api_key),
            labels=opts.labels,
            baseline=opts.baseline_server,
            prompts=suite.prompts,
            suite=suite.label,
            long_context=suite if suite.long_kinds else None,
            progress=lambda m: say(f"  served: {m}"),
            on_tick=on_tick,
        )
        return rep.to_dict(), served_command(opts)

    rows = [[p.id, p.category, p.text, p.messages] for p in suite.prompts]  # the stage reruns when they change
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True, default=list).encode()).hexdigest()
    return r.stage(SERVED_STAGE, key, {"prompts": digest}, body).result
