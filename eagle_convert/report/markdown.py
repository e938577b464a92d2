"""`report.md`, rendered from `report.json` alone (so the two can never disagree)."""

from __future__ import annotations

import json
from typing import Any

from eagle_convert.draft import k_sweep_lines
from eagle_convert.finetune import held_out_al
from eagle_convert.measure import bucket_label


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    return [_row(head), "|" + "|".join(["---"] * len(head)) + "|", *(_row(r) for r in rows), ""]


def _verdict(val: dict[str, Any]) -> str:
    """errors / warnings; with `report --for`, each engine release's, named ("SGLang 0.5.23: 0 / 1")."""
    engines = val.get("engines")
    if engines:
        return "; ".join(f"{e['label']}: {e['errors']} / {e['warnings']}" for e in engines)
    return f"{val.get('errors', '?')} / {val.get('warnings', '?')}"


def _summary(data: dict[str, Any]) -> list[str]:
    acc = data["acceptance"]
    k = acc["settings"]["k"]
    base = acc["drafts"][0]["total"]["acceptance_length"]
    by = {v["name"]: v for v in data["variants"]}
    rows = []
    for d in acc["drafts"]:
        t, v = d["total"], by.get(d["label"], {})
        val = v.get("validate") or {}
        delta = t["acceptance_length"] - base
        rows.append(
            [
                f"**{d['label']}**",
                d.get("variant") or "?",
                f"{t['acceptance_length']:.3f}",
                "—" if d is acc["drafts"][0] else f"{delta:+.3f}",
                f"{100 * t['acceptance_rate']:.1f}%",
                *(f"{100 * p:.1f}%" for p in t["per_position"]),
                _verdict(val),
                f"`{v.get('path', d['path'])}`",
            ]
        )
    head = [
        "variant",
        "kind",
        "AL",
        "Δ AL vs input",
        "acceptance rate",
        *(f"pos {i + 1}" for i in range(k)),
        "validate errors / warnings",
        "folder",
    ]
    return _table(head, rows)


def _groups(acc: dict[str, Any]) -> list[str]:
    """AL per category x context bucket, then a category across buckets and a bucket across
    categories only where that adds up more than one row above (else it repeats that row)."""
    labels = [d["label"] for d in acc["drafts"]]
    items = acc["prompts"]["items"]
    cats = list(dict.fromkeys(p["category"] for p in items))
    bks = sorted({p["bucket"] for p in items})
    present = {(p["category"], p["bucket"]) for p in items}
    keys: list[tuple[str, Any]] = [(c, b) for c in cats for b in bks if (c, b) in present]
    keys += [(c, None) for c in cats if sum((c, b) in present for b in bks) > 1]
    keys += [("all", b) for b in bks if sum((c, b) in present for c in cats) > 1]
    rows = []
    for cat, bucket in keys:
        first = next((g for g in acc["drafts"][0]["groups"] if g["category"] == cat and g["bucket"] == bucket), None)
        if first is None:  # no per-request counters for this key (vLLM totals only)
            continue
        cells = []
        for d in acc["drafts"]:
            g = next((g for g in d["groups"] if g["category"] == cat and g["bucket"] == bucket), None)
            cells.append("—" if g is None else f"{g['acceptance_length']:.2f}")
        rows.append([cat, bucket_label(bucket, unit="tokens"), first["requests"], *cells])
    return _table(["category", "context", "runs", *labels], rows)


def _throughput(t: dict[str, Any], al: dict[str, float]) -> list[str]:
    cs = t["concurrency"]
    rows = [
        [
            f"{t['baseline']['label']} (target alone)",
            "1.00",
            *(f"{lv['per_user_tokens_per_s']:.1f}" for lv in t["baseline"]["levels"]),
        ]
    ]
    for d in t["drafts"]:
        cells = []
        for lv in d["levels"]:
            x = t["speedup"].get(d["label"], {}).get(str(lv["concurrency"]))
            cells.append(f"{lv['per_user_tokens_per_s']:.1f} (×{x:.2f})" if x else f"{lv['per_user_tokens_per_s']:.1f}")
        rows.append([d["label"], f"{al.get(d['label'], 0):.2f}", *cells])
    s = t["settings"]
    out = _table(["draft", "AL", *(f"concurrency {c}: tokens/s per user (speedup)" for c in cs)], rows)
    out += [
        f"{t['engine_version']} on {t['device']}, greedy, {s.get('max_new_tokens')} tokens per request, "
        f"max_num_seqs {s.get('max_num_seqs')}; {t['metric']}. Every row ran in the same vLLM worker "
        "with the same engine arguments.",
        "",
    ]
    if t.get("note"):
        out += [f"> **Read this before the speedups:** {t['note']}", ""]
    return out


def _served_line(engine: str, settings: dict[str, Any]) -> str:
    """Which speculative config produced the numbers: the one given, or what each engine drafted with."""
    given = settings.get("speculative_config")
    if given is not None:
        return f"`{json.dumps(given)}` (--speculative-config: every engine ran with exactly these keys)"
    if engine == "vllm":
        return (
            f"none given: each engine ran with `method` eagle3, `num_speculative_tokens` {settings['k']} "
            "and vLLM's defaults for the rest"
        )
    return f"none given: the reference engine drafts as `method` eagle3, `num_speculative_tokens` {settings['k']}"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _drift(drift: dict[str, Any], k: int) -> list[str]:
    """Per variant: drift's verdict line and its pooled rows at depth 1, the serving k and the deepest."""
    s = drift["settings"]
    depth = s["depth"]
    shown = sorted({1, min(k, depth), depth})
    lines = [
        f"Drift's reference drafter on the same prompts and buckets, drafting to depth {depth} (k = {k} is "
        f"served) from every round of {s['max_new_tokens']} greedy tokens; sink = the first {s['sink_tokens']} "
        "context tokens; shares are of the draft layer's attention mass, averaged over heads and positions; "
        "acceptance at depth d is conditional on depths 1..d-1 accepted. Thresholds and every depth: "
        "`drift` (docs/drift.md) and report.json's `drift`.",
        "",
        "![drift](drift.png)",
        "",
    ]
    for d in drift["drafts"]:
        flags = ", ".join(f for f in ("fc_norm", "norm_output") if d[f]) or "no 3.1 flags"
        lines += [f"**{d['label']}** ({d.get('variant') or '?'}; {flags}): {d['verdict']['text']}", ""]
        rows = [r for r in d["overall"]["depths"] if r["depth"] in shown]
        lines += _table(
            [
                "depth",
                "n (draft passes)",
                "sink share",
                "own share",
                "fed-back RMS",
                "conditional acceptance (accepted / reached)",
            ],
            [
                [
                    r["depth"],
                    r["passes"],
                    _num(r["sink_share"]),
                    _num(r["own_share"]),
                    _num(r["fed_rms"], "{:.3g}"),
                    f"{_num(r['conditional_acceptance'])} ({r['accepted']} / {r['reached']})",
                ]
                for r in rows
            ],
        )
    return lines


def _served(served: dict[str, Any]) -> list[str]:
    """The running servers (`report --server`): per server and level, smoke --server's table."""
    s = served["settings"]
    lines = [
        f"Measured on the running servers (`smoke --server`), not with the report's engine: "
        f"{served['prompts']['count']} prompt runs (prompt x context bucket; {served['prompts']['suite']}) per "
        f"level, {s['max_new_tokens']} new "
        f"tokens each (EOS ignored), temperature {s['temperature']}, the server's chat template. AL and "
        "per-position acceptance from each server's /metrics counter deltas per level; tokens/s per user from the "
        "engine's decode histograms where exported, else the stream (`rate_source` in report.json's `served`); "
        "speedup over the baseline server at the same level.",
        "",
    ]
    base = served.get("baseline_server")
    ctx = any(lv.get("bucket", 0) for srv in served["servers"] for lv in srv["levels"])  # padded buckets

    def where(lv: dict[str, Any]) -> list[Any]:
        return [bucket_label(lv.get("bucket", 0), unit="tokens"), lv["concurrency"]] if ctx else [lv["concurrency"]]

    head = [*(["context"] if ctx else []), "concurrency", "requests (failed)", "output tokens", "AL", "per position"]
    head += ["tokens/s per user", "TTFT s"]
    for srv in served["servers"]:
        k = "no draft" if srv["k"] is None else f"k = {srv['k']}"
        lines += [f"**{srv['label']}**: `{srv['url']}`, {srv['model']} ({srv.get('engine') or '?'}, {k})", ""]
        rows = [
            [
                *where(lv),
                f"{lv['requests']} ({lv['failed']})",
                lv["output_tokens"],
                _num(lv["acceptance_length"]),
                "—" if lv["per_position"] is None else " ".join(f"{100 * p:.0f}%" for p in lv["per_position"]),
                _num(lv["per_user_tokens_per_s"], "{:.1f}"),
                _num(lv["ttft_s"], "{:.3f}"),
                *([_num(lv["speedup"], "×{:.2f}")] if base else []),
            ]
            for lv in srv["levels"]
        ]
        lines += _table([*head, *(["speedup"] if base else [])], rows)
    if base:
        lines += [f"**baseline server** (no speculation): `{base['url']}`, {base['model']}", ""]
        rows = [
            [*where(lv), f"{lv['requests']} ({lv['failed']})", _num(lv["per_user_tokens_per_s"], "{:.1f}")]
            for lv in base["levels"]
        ]
        lines += _table([*head[: 1 + ctx], "requests (failed)", "tokens/s per user"], rows)
    notes = [f"{srv['label']}: {text}" for srv in served["servers"] for text in srv["identity"]]
    notes += [
        f"{srv['label']} at concurrency {lv['concurrency']}"
        + (f", context {bucket_label(lv['bucket'], unit='tokens')}" if lv.get("bucket") else "")
        + f": {text}"
        for srv in served["servers"]
        for lv in srv["levels"]
        for text in ([lv["no_figure"]] if lv["no_figure"] else []) + lv["notes"]
    ]
    return lines + ([*(f"- {n}" for n in notes), ""] if notes else [])


def render_markdown(data: dict[str, Any]) -> str:
    acc = data["acceptance"]
    s = acc["settings"]
    lines = [
        f"# eagle-convert report: `{data['draft_name']}` from EAGLE-3 to EAGLE-3.1",
        "",
        f"- draft: `{data['draft']}`",
        f"- target: `{data['target']}`",
        f"- engine: {acc['engine']} ({acc.get('engine_version') or '?'}); k = {s['k']}, temperature "
        f"{s['temperature']}, {s['max_new_tokens']} new tokens per prompt (EOS ignored), seed {s['seed']}",
        f"- prompts: suite {acc['prompts'].get('suite') or 'built-in'}, {acc['prompts']['count']} runs (prompt x "
        f"context bucket), chat template {acc['prompts']['chat_template']}, buckets "
        f"{', '.join(bucket_label(b, unit='tokens') for b in s['buckets'])}",
        f"- speculative config: {_served_line(acc['engine'], s)}",
        f"- eagle-convert {data['eagle_convert']}; {data['seconds']:.0f} s this run "
        f"({len(data['ran'])} stages ran, {len(data['skipped'])} unchanged and skipped)",
        "",
        "![overview](report.png)",
        "",
        "## Acceptance, side by side",
        "",
        "AL = 1 + accepted draft tokens per draft round (at most k + 1); position i = share of rounds whose "
        "first i drafts were all accepted (vLLM 0.32.0's definitions). Same prompts, buckets and engine "
        "for every row.",
        "",
    ]
    lines += _summary(data)
    lines += ["![AL per variant](al.png)", ""]
    if data["checks"]:
        lines += ["## Checks", ""]
        lines += [f"- {'✅' if c['holds'] else '❌'} {c['claim']}: {c['detail']}" for c in data["checks"]]
        lines.append("")
    sweeps = [(d["label"], d["k_sweep"]) for d in acc["drafts"] if d.get("k_sweep")]
    if sweeps:
        lines += ["## Which k to serve with", "", *k_sweep_lines(sweeps), ""]
    lines += ["## Per-user throughput", ""]
    t = acc.get("throughput")
    if t:
        lines += _throughput(t, {d["label"]: d["total"]["acceptance_length"] for d in acc["drafts"]})
        lines += ["![speedup](speedup.png)", ""]
    else:
        lines += [data["throughput_note"], ""]
    lines += ["## By context length and category", "", "![buckets](buckets.png) ![positions](positions.png)", ""]
    lines += _groups(acc)
    if data.get("drift"):
        lines += ["## Attention drift by draft depth", "", *_drift(data["drift"], s["k"])]
    if data.get("served"):
        lines += ["## The running deployment", "", *_served(data["served"])]
    cal = data.get("calibration")
    if cal:
        agree = (
            ""
            if cal.get("agreement") is None
            else f" First-step top-1 agreement with the EAGLE-3 draft on {cal['held_out_prompts']} held-out prompts "
            f"({cal['positions']} positions): {100 * cal['agreement']:.1f}% calibrated, "
            f"{100 * (cal.get('agreement_identity') or 0):.1f}% identity."
        )
        lines += [
            "## Calibration",
            "",
            f"`fc_norm.{{i}}.weight` = {', '.join(f'{v:.4g}' for v in cal['values'])} (aux layers "
            f"{cal['aux_ids']}): the {cal['statistic']}, over {cal['tokens']} tokens of {cal['fit_prompts']} "
            f"prompts ({cal['prompts']}), {cal['seconds']:.0f} s on {cal['device']}.{agree}",
            "",
        ]
    ft = data.get("finetune")
    if ft:
        r = ft["result"]
        best = r.get("best")
        kept = (
            f" Kept {best['stage']} step {best['step']}: held-out acceptance length (AL, predicted from the "
            f"TTT steps' top-1 accuracy) {held_out_al(r.get('eal_before') or 0.0):.3f} → "
            f"{held_out_al(best['eal']):.3f} on {r.get('held_out', '?')} held-out sequences."
            if best
            else ""
        )
        lines += [
            "## Fine-tune",
            "",
            f"From `{ft['source']}`: {r['sequences']} sequences, {r['tokens']} tokens, {r['seconds']:.0f} s; "
            f"teacher-forced loss {r['loss_before']:.3f} → {r['loss_after']:.3f}, step accuracy "
            f"{r['step_acc_before']} → {r['step_acc_after']}.{kept}",
            "",
        ]
    lines += ["## Variants and their model cards", ""]
    lines += [
        f"- **{v['name']}**: {v['title']} — `{v['path']}`" + (f", card `{v['card']}`" if v.get("card") else "")
        for v in data["variants"]
    ]
    lines += ["", "## Stages", ""]
    lines += _table(
        ["stage", "this run", "seconds"],
        [[st["name"], st["status"], f"{st['seconds']:.1f}" if st["status"] == "ran" else "—"] for st in data["stages"]],
    )
    lines += [
        "## Reproduce each step",
        "",
        "Also in `commands.sh`. Re-running the same `eagle-convert report` "
        "command skips every stage whose inputs (content hashes) and options did not change.",
        "",
        "```bash",
    ]
    lines += [c["command"] for c in data["commands"]]
    lines += ["```", ""]
    if data["notes"]:
        lines += ["## Notes", "", *(f"- {n}" for n in data["notes"]), ""]
    return "\n".join(lines)
