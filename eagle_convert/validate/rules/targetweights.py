"""Checks against the target's weights: the draft's embedding and lm_head rows (`--target`).

vLLM keeps a draft's own `embed_tokens` unless it is bit-identical to the target's
(`v1/spec_decode/llm_base_proposer.py` `_maybe_share_embeddings`, the same `torch.equal` test in every
release 0.21.0-0.33.0, and the V2 runner's `_should_share`, the only copy from 0.34.0; `tables.EMBED_SHARING`),
so a random, NaN or rescaled copy is what the draft reads (TorchSpec issue #38). A draft whose
lm_head was initialised from the target's keeps each row close to the target row of its token; when
`d2t` is regenerated after training (SpecForge PR #534) row i no longer matches token i + d2t[i].

Only rows are read, by byte range (`io/rows.py`), from local files or the hub: a sample of the
embedding, and for the lm_head a sample of slots with the target rows of their own and neighbouring
mapped ids. `--deep` compares every embedding row and searches the whole target lm_head for each
sampled slot's best match (whole tensors are read only then).

Decisions and tolerances (any x86-64 CPU: the arithmetic is numpy float32 on values decoded exactly):
- equal: every compared draft row, rounded to the target's dtype, equals the target row bit for bit
  (what vLLM's torch.equal sees after loading both in the model dtype);
- random: median cosine below 0.5 (independent vectors in H >= 64 dimensions have |cos| <= 4/sqrt(H)
  <= 0.5 at four standard deviations; a trained copy of the target's rows stays above 0.9);
- scaled: cosine fine but median norm ratio outside [0.8, 1.25] (bf16 rounding moves norms < 1%);
- initialised from the target: at least half the sampled lm_head slots have a target row with
  cosine >= 0.5 (same bound as above); misaligned: such a slot's best row is not its own token's,
  whose cosine is < 0.5, for at least 10% of the slots (and two).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from eagle_convert.draft import load_schema
from eagle_convert.io import RowReader, decode, encode, read_array
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.shapes import INTS
from eagle_convert.vllm_model import EMBED_SHARING

if TYPE_CHECKING:
    import numpy as np

MATCH_COS = 0.5
SCALE_BAND = (0.8, 1.25)
EMBED_SAMPLE, LM_HEAD_SAMPLE, DEEP_LM_HEAD_SAMPLE = 64, 32, 64
DEEP_BLOCK_BYTES = 8 << 20  # rows per block in --deep: memory stays ~10x this whatever the vocabulary
WINDOW = 4  # neighbouring slots whose mapped ids a sampled lm_head row is also compared with


def check(ctx: Context) -> list[Finding]:
    tm, env = ctx.target_model, ctx.env
    if tm is None or ctx.target is None:
        return []
    embed = ctx.disk_name("embed_tokens.weight")
    lm_head = ctx.disk_name("lm_head.weight")
    same_width = env.get("H") is not None and env.get("H") == ctx.target.hidden_size
    want_embed = embed is not None and same_width and env.get("V") == ctx.target.vocab_size
    want_head = lm_head is not None and same_width
    if not (want_embed or want_head):
        return []
    weights = tm.weights()
    if weights is None:
        ctx.notes["target_weights"] = tm.weights_note or "target weights not read"
        return []
    names = load_schema("layouts.json")["target_tensors"]
    t_embed = next((n for n in names["embed"] if n in weights.tensors), None)
    t_head = next((n for n in names["lm_head"] if n in weights.tensors), None) or t_embed  # tied embeddings
    t0 = time.perf_counter()
    readers: list[RowReader] = []
    out: list[Finding] = []
    try:
        if embed and want_embed and t_embed:
            out += _embed(
                ctx,
                embed,
                RowReader(ctx.ckpt.source, ctx.tensors[embed]),
                RowReader(weights.source, weights.tensors[t_embed]),
                readers,
            )
        if lm_head and want_head and t_head:
            out += _lm_head(ctx, lm_head, RowReader(weights.source, weights.tensors[t_head]), readers)
    except ValueError as exc:  # a dtype numpy cannot decode (fp8 target), a 1-D or odd-shaped tensor
        ctx.notes["target_weights"] = f"target weights not compared ({exc})"
        return out
    ctx.timings["target_weights"] = time.perf_counter() - t0
    got = sum(r.bytes_read for r in readers)
    used = sorted({n for n in (t_embed if want_embed else None, t_head if want_head else None) if n})
    how = "every row" if ctx.deep else "sampled rows"
    ctx.notes["target_weights"] = (
        f"read {got / 2**20:.2f} MiB in {sum(r.reads for r in readers)} range reads "
        f"({how}) of the draft's and the target's {', '.join(used)}"
    )
    return out


def _sample(n: int, k: int, first: int = 0) -> list[int]:
    import numpy as np

    return sorted(set(range(min(first, n))) | set(np.linspace(0, n - 1, min(k, n)).round().astype(int).tolist()))


def _round_to(dtype: str, x: np.ndarray) -> np.ndarray:
    """`x` (float32) rounded to the target's dtype, back in float32 (round to nearest even, as torch)."""
    import numpy as np

    if dtype in ("BF16", "F16"):
        return decode(encode(x, dtype), dtype, x.shape).astype(np.float32, copy=False)
    return x


def _embed(ctx: Context, name: str, draft: RowReader, target: RowReader, readers: list[RowReader]) -> list[Finding]:
    import numpy as np

    readers += [draft, target]
    if draft.cols != target.cols or draft.rows != target.rows:
        return []
    pairs: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]
    if ctx.deep:
        per = max(1, DEEP_BLOCK_BYTES // max(draft.row_bytes, target.row_bytes, 1))
        spans = ((f, min(per, draft.rows - f)) for f in range(0, draft.rows, per))
        pairs = ((draft.span(f, n), target.span(f, n), np.arange(f, f + n)) for f, n in spans)
    else:
        ids = _sample(draft.rows, EMBED_SAMPLE, first=8)
        pairs = iter([(draft.read(ids), target.read(ids), np.array(ids))])
    equal, bad_rows, first_bad, cos, ratio, rows = True, 0, None, [], [], 0
    for d, t, row_ids in pairs:
        rows += len(d)
        equal = equal and bool(np.array_equal(_round_to(target.info.dtype, d), t))
        finite = np.isfinite(d).all(axis=1)
        if not finite.all():
            bad_rows += int((~finite).sum())
            first_bad = first_bad if first_bad is not None else int(row_ids[np.flatnonzero(~finite)[0]])
        dn, tn = np.linalg.norm(d, axis=1), np.linalg.norm(t, axis=1)
        ok = finite & (tn > 0) & (dn > 0)
        cos.append((d[ok] * t[ok]).sum(axis=1) / (dn[ok] * tn[ok]))
        ratio.append(dn[ok] / tn[ok])
    if equal:
        return []
    what = f"{rows} {'rows' if ctx.deep else 'sampled rows'} compared with the target's"
    where = "_maybe_share_embeddings" if ctx.release.has_v1 else "Model Runner V2's _should_share"
    rule = f"{EMBED_SHARING} (vLLM {ctx.release} {where})"
    if bad_rows:
        at = f" (first: token {first_bad})"
        return [finding("E505", f"{name} holds NaN/Inf in {bad_rows} of {what}{at}; {rule}", tensor=name)]
    c, r = float(np.median(np.concatenate(cos))), float(np.median(np.concatenate(ratio)))
    if c < MATCH_COS:
        return [
            finding(
                "E505",
                f"{name} is not the target's embedding: median cosine {c:.3f} over {what} "
                f"(a random initialisation?); {rule}",
                tensor=name,
            )
        ]
    if not SCALE_BAND[0] <= r <= SCALE_BAND[1]:
        return [
            finding(
                "E505",
                f"{name} is the target's embedding scaled by {r:.3g} (median row-norm ratio over "
                f"{what}, cosine {c:.3f}); {rule}",
                tensor=name,
            )
        ]
    return [
        finding(
            "I507",
            f"{name} matches the target's (median cosine {c:.4f}, norm ratio {r:.4f} over {what}) "
            "but is not bit-identical: vLLM keeps it as a separate copy",
            tensor=name,
        )
    ]


def _d2t(ctx: Context, rows: int) -> np.ndarray | None:
    import numpy as np

    name = ctx.disk_name("d2t")
    if name is None:
        full = ctx.target is not None and rows == ctx.target.vocab_size
        return np.zeros(rows, dtype=np.int64) if full else None
    info = ctx.tensors[name]
    if info.dtype not in INTS or tuple(info.shape) != (rows,):
        return None
    return read_array(ctx.ckpt, name).astype(np.int64)


def _unit(x: np.ndarray) -> np.ndarray:
    import numpy as np

    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def _lm_head(ctx: Context, name: str, target: RowReader, readers: list[RowReader]) -> list[Finding]:
    import numpy as np

    draft = RowReader(ctx.ckpt.source, ctx.tensors[name])
    readers += [draft, target]
    d2t = _d2t(ctx, draft.rows)
    if d2t is None or draft.cols != target.cols:
        return []
    ids = np.arange(draft.rows, dtype=np.int64) + d2t
    if ids.min(initial=0) < 0 or ids.max(initial=0) >= target.rows:
        return []  # E404 reports it
    slots = _sample(draft.rows, DEEP_LM_HEAD_SAMPLE if ctx.deep else LM_HEAD_SAMPLE)
    d = _unit(draft.read(slots))
    own = ids[slots]
    if ctx.deep:  # every target row: the best match of each sampled slot anywhere in the vocabulary
        best, best_id = np.full(len(slots), -2.0), np.zeros(len(slots), dtype=np.int64)
        own_cos = np.zeros(len(slots))
        for first, block in target.blocks(DEEP_BLOCK_BYTES):
            sims = d @ _unit(block).T
            top = sims.argmax(axis=1)
            better = sims[np.arange(len(slots)), top] > best
            best[better], best_id[better] = sims[np.arange(len(slots)), top][better], first + top[better]
            inside = (own >= first) & (own < first + len(block))
            own_cos[inside] = sims[np.flatnonzero(inside), own[inside] - first]
    else:  # the slot's own id and those of its neighbours: a d2t shifted by a few slots shows here
        cands = [
            sorted({int(ids[j]) for j in range(max(0, i - WINDOW), min(draft.rows, i + WINDOW + 1))}) for i in slots
        ]
        pool = sorted({c for row in cands for c in row})
        rows = dict(zip(pool, _unit(target.read(pool)), strict=True))
        own_cos = np.array([float(d[k] @ rows[int(own[k])]) for k in range(len(slots))])
        sims = [[(float(d[k] @ rows[c]), c) for c in cands[k]] for k in range(len(slots))]
        best = np.array([max(s)[0] for s in sims])
        best_id = np.array([max(s)[1] for s in sims])
    initialised = float(np.mean(best >= MATCH_COS))
    wrong = np.flatnonzero((best >= MATCH_COS) & (own_cos < MATCH_COS) & (best_id != own))
    if initialised < 0.5 or len(wrong) < max(2, 0.1 * len(slots)):
        return []
    k = int(wrong[0])
    slot, match = slots[k], int(best_id[k])
    other = np.flatnonzero(ids == match)
    via = f", the token d2t gives slot {int(other[0])}" if len(other) else ""
    return [
        finding(
            "E506",
            f"{name}: {len(wrong)} of {len(slots)} sampled rows match another target token than "
            f"d2t maps them to (slot {slot}: token {int(own[k])} cosine {own_cos[k]:.2f}, but token "
            f"{match}{via}, cosine {best[k]:.2f}); the rows were initialised from the target's "
            f"lm_head ({initialised:.0%} of the sampled rows match a target row), so d2t was "
            "probably regenerated after training",
            tensor=name,
            field="d2t",
        )
    ]
