"""Render an `InspectReport` as a rich summary (and a tensor table on request)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eagle_convert.draft import InspectReport


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1024
    return f"{n} B"


def render_inspect(console: Console, report: InspectReport, *, tensors: bool) -> None:
    info = report.info
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row("source", escape(report.source) + (" (hub)" if report.is_hub else ""))
    summary.add_row("layout", f"{info.layout} — {info.producer}")
    summary.add_row("", "[dim]" + escape("; ".join(info.layout_reasons)) + "[/dim]")
    summary.add_row("variant", info.variant)
    summary.add_row("", "[dim]" + escape("; ".join(info.variant_reasons)) + "[/dim]")
    arch = escape(", ".join(info.architectures)) or "(none)"
    summary.add_row("architecture", f"{arch} → vLLM {info.vllm_class or '(no EAGLE-3 class)'}")
    if info.vllm_note:
        summary.add_row("", f"[yellow]{escape(info.vllm_note)}[/yellow]")
    summary.add_row("attention", f"{info.attention} [dim]({escape(info.attention_reason)})[/dim]")
    flags = ", ".join(
        f"{name}={'true' if f.value else 'false'}"
        + (f" [dim]({escape(', '.join(f.where))})[/dim]" if f.where else " [dim](default)[/dim]")
        + ("" if f.vllm == f.value else f" [yellow](vLLM reads {'true' if f.vllm else 'false'})[/yellow]")
        for name, f in info.flags.items()
    )
    summary.add_row("flags", flags)
    summary.add_row(
        "hidden", f"H={info.hidden_size}  target H={info.target_hidden_size}  draft layers={info.num_layers}"
    )
    summary.add_row("aux layers", f"A={info.num_aux} [dim]({escape(info.num_aux_source)})[/dim]")
    if report.fc_norm is not None:
        line = escape(report.fc_norm.line())
        summary.add_row("fc_norm", f"[yellow]{line}[/yellow]" if report.fc_norm.untrained else line)
    ids = info.aux_layer_ids
    summary.add_row(
        "aux layer ids",
        f"{ids} [dim]({escape(', '.join(info.aux_layer_ids_where))})[/dim]"
        if ids
        else "[yellow]not set[/yellow] (vLLM falls back to (2, N//2, N-3))",
    )
    summary.add_row(
        "vocab",
        f"V={info.vocab_size}  draft V={info.draft_vocab_size}  {'reduced' if info.vocab.reduced else 'full'}"
        + ("  embed_tokens: yes" if info.has_embed else "  embed_tokens: no (shared from target)"),
    )
    summary.add_row("d2t", _describe_map(info.vocab.d2t))
    summary.add_row("t2d", _describe_map(info.vocab.t2d))
    dtypes = ", ".join(f"{d}×{n}" for d, n in sorted(info.dtypes.items()))
    summary.add_row(
        "tensors",
        f"{info.num_tensors} ({dtypes}), {human_bytes(info.total_bytes)}, {info.storage}: {escape(', '.join(info.files))}",
    )
    if not report.has_config:
        summary.add_row("config", "[yellow]no config.json found[/yellow]")
    line = escape(report.vllm.line())
    summary.add_row("vLLM release", f"[yellow]{line}[/yellow]" if not report.vllm.verified else line)
    if (warning := report.vllm.warning()) is not None:
        summary.add_row("", f"[yellow]{escape(warning)}[/yellow]")
    console.print(summary)
    if tensors:
        table = Table(title="tensors")
        for col in ("name", "canonical", "dtype", "shape", "bytes", "file"):
            table.add_column(col, justify="right" if col == "bytes" else "left")
        for row in report.tensor_rows():
            canon = row["canonical"] if row["canonical"] != row["name"] else ""
            table.add_row(
                escape(row["name"]),
                escape(canon),
                row["dtype"],
                str(row["shape"]),
                human_bytes(row["bytes"]),
                escape(row["file"]),
            )
        console.print(table)


def _describe_map(entry: dict | None) -> str:
    if not entry:
        return "absent"
    parts = [f"{entry['dtype']}{entry['shape']}"]
    for key in ("min_target_id", "max_target_id", "unique", "increasing", "count", "consistent_with_d2t"):
        if key in entry:
            parts.append(f"{key}={entry[key]}")
    return "  ".join(parts)
