"""The draft-to-target vocabulary maps: d2t offsets and the t2d mask (reads only these two tensors).

vLLM scatters draft logit i to target id i + d2t[i]; it never checks the map, so an out-of-range
id crashes at the first decode and a colliding one silently loses draft tokens. t2d is dropped by
vLLM but must agree with d2t: when it does not, one of the two maps is corrupt.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from itertools import islice

from eagle_convert.io import read_ints, readable_vocab_map
from eagle_convert.validate.findings import Finding, finding
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.shapes import INTS


def check(ctx: Context) -> list[Finding]:
    d2t_name = next((n for n in ctx.tensors if n in ("d2t", "model.d2t")), None)
    t2d_name = next((n for n in ctx.tensors if n in ("t2d", "model.t2d")), None)
    v = ctx.env.get("V") or (ctx.tensors[t2d_name].shape[0] if t2d_name and ctx.tensors[t2d_name].shape else None)
    vd = ctx.env.get("Vd")
    # The maps' values are the checkpoint's: read and checked once per (v, vd) however many releases ask.
    out = list(ctx.memo(("vocab", d2t_name, t2d_name, v, vd), lambda: _check_maps(ctx, d2t_name, t2d_name, v, vd)))
    if d2t_name is None and ctx.env.get("reduced"):
        out += _side_files(ctx)
    return out


def _check_maps(
    ctx: Context, d2t_name: str | None, t2d_name: str | None, v: int | None, vd: int | None
) -> list[Finding]:
    """E404-E408 from the values of d2t and t2d (a function of the checkpoint and v, vd only).

    Plain Python over `read_ints` (d2t has ~32k entries, t2d ~150k): cheaper than importing numpy,
    which nothing else in an upgrade's preflight needs. Values wrap to int64 as torch's would.
    """
    out: list[Finding] = []
    targets = d2t = None
    t2d = (
        list(map(bool, read_ints(ctx.ckpt, t2d_name)))
        if t2d_name and _usable(ctx, t2d_name, INTS | {"BOOL"}, v)
        else None
    )
    if d2t_name and _usable(ctx, d2t_name, INTS, vd):
        d2t = _int64(read_ints(ctx.ckpt, d2t_name))
        targets = _int64(list(map(operator.add, range(len(d2t)), d2t)))
        if absolute := _absolute_ids(d2t_name, d2t, t2d, v):
            return [absolute]  # the root cause: the offset checks below would only echo it
        out += _check_d2t(d2t_name, targets, v)
    if t2d is not None and t2d_name:
        out += _check_t2d(t2d_name, t2d, targets, v, vd)
    return out


def _int64(values: Sequence[int]) -> list[int]:
    """`values` as int64 (a U64 above 2**63, or an offset overflowing its id, wraps to negative)."""
    if values and (min(values) < -(1 << 63) or max(values) >= 1 << 63):
        return [(x + (1 << 63)) % (1 << 64) - (1 << 63) for x in values]
    return list(values)


MIN_ABSOLUTE = 64  # shorter maps may lack adjacent ids by chance


def _absolute_ids(name: str, d2t: list[int], t2d: list[bool] | None, v: int | None) -> Finding | None:
    """E408: d2t holds the target ids themselves (vLLM adds i: draft id i goes to i + d2t[i]).

    Offsets are non-decreasing with a flat run wherever the draft vocabulary holds adjacent target ids
    (every frequency-picked vocabulary does: special tokens, bytes); absolute ids strictly increase.
    Evidence, strongest first: d2t == arange (verl-SpeCo PR #67), t2d set exactly at d2t's values but
    not at i + d2t[i], or (without t2d) a strictly increasing in-vocabulary d2t of >= 64 entries.
    """
    n = len(d2t)
    if n < 2 or d2t[0] < 0 or (v is not None and d2t[-1] >= v) or not _increasing(d2t):
        return None
    why = None
    if d2t == list(range(n)):
        why = "d2t[i] == i for every i, so draft id i goes to target id 2i"
    elif t2d is not None and len(t2d) > d2t[-1] and all(t2d[d] for d in d2t) and sum(t2d) == n:
        why = "t2d is set exactly at the values of d2t"
    elif t2d is None and n >= MIN_ABSOLUTE:
        why = f"its {n} values strictly increase: as offsets the draft vocabulary would hold no two adjacent ids"
    if why is None:
        return None
    i = n // 2
    return finding(
        "E408",
        f"{name} holds absolute target ids, not offsets ({why}); vLLM maps draft id i to "
        f"i + d2t[i], e.g. draft id {i} to {i + d2t[i]} instead of {d2t[i]}",
        tensor=name,
    )


def _increasing(values: list[int]) -> bool:
    return all(map(operator.lt, values, islice(values, 1, None)))


def _side_files(ctx: Context) -> list[Finding]:
    """E409: a reduced vocabulary whose map sits in a file vLLM never reads (NeMo Automodel PR #2447)."""
    from fnmatch import fnmatch

    from eagle_convert.draft import load_schema

    patterns = load_schema("layouts.json")["vocab_side_files"]
    weights = set(ctx.ckpt.weight_files)
    try:
        files = ctx.ckpt.source.list_files()
    except Exception:  # noqa: BLE001 - a listing failure is the reader's to report, not this rule's
        return []
    side = [
        f
        for f in files
        if f not in weights
        and not f.endswith((".json", ".md"))
        and any(fnmatch(f.rpartition("/")[2].lower(), p) for p in patterns)
    ]
    if not side:
        return []
    return [
        finding(
            "E409",
            f"d2t is not in the weights but {', '.join(side[:3])} sits beside them: vLLM reads "
            "d2t only from the weight files, so the reduced vocabulary maps to the first "
            f"{ctx.env.get('Vd')} target ids",
            field=side[0],
        )
    ]


def _usable(ctx: Context, name: str, dtypes: set[str], expected: int | None) -> bool:
    """A 1-D integer map of plausible length (longer ones are reported by the shape rules, unread)."""
    info = ctx.tensors[name]
    return info.dtype in dtypes and readable_vocab_map(info, expected)


def _check_d2t(name: str, targets: list[int], v: int | None) -> list[Finding]:
    out = []
    if not targets:
        return [finding("E404", f"{name} is empty", tensor=name)]
    if v is not None and (min(targets) < 0 or max(targets) >= v):
        bad = [i for i, t in enumerate(targets) if t < 0 or t >= v]
        if bad:
            i = bad[0]
            out.append(
                finding(
                    "E404",
                    f"{name}: {len(bad)} draft ids map outside [0, {v}) (first: draft id {i} -> "
                    f"target id {targets[i]}); vLLM's logit scatter fails at the first decode",
                    tensor=name,
                )
            )
    distinct = len(set(targets))
    if distinct != len(targets):
        dup = min(t for t, c in Counter(targets).items() if c > 1)
        ids = [i for i, t in enumerate(targets) if t == dup][:3]
        out.append(
            finding(
                "E405",
                f"{name}: {len(targets) - distinct} collisions, e.g. draft ids {ids} all map to "
                f"target id {dup} (is it absolute ids instead of offsets?)",
                tensor=name,
            )
        )
    elif not _increasing(targets):
        i = next(i for i in range(len(targets) - 1) if targets[i + 1] <= targets[i])
        out.append(
            finding(
                "W406",
                f"{name}: target ids are not increasing (draft id {i + 1} -> {targets[i + 1]} after {targets[i]})",
                tensor=name,
            )
        )
    return out


def _check_t2d(name: str, t2d: list[bool], targets: list[int] | None, v: int | None, vd: int | None) -> list[Finding]:
    problems = []
    if v is not None and len(t2d) != v:
        problems.append(f"length {len(t2d)} != vocab_size {v}")
    count = sum(t2d)
    if vd is not None and count != vd:
        problems.append(f"{count} entries set but draft_vocab_size is {vd}")
    if targets is not None:
        size = len(t2d)
        inside = not targets or (min(targets) >= 0 and max(targets) < size)
        if not (inside and all(map(t2d.__getitem__, targets))):
            missing = [i for i, t in enumerate(targets) if not (0 <= t < size and t2d[t])]
            i = missing[0]
            problems.append(f"{len(missing)} d2t targets not set in t2d (first: draft id {i} -> {targets[i]})")
    if not problems:
        return []
    return [finding("E407", f"{name} disagrees with d2t / config: " + "; ".join(problems), tensor=name)]
