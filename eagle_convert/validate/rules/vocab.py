"""The draft-to-target vocabulary maps: d2t offsets and the t2d mask (reads only these two tensors).

vLLM scatters draft logit i to target id i + d2t[i]; it never checks the map, so an out-of-range
id crashes at the first decode and a colliding one silently loses draft tokens. t2d is dropped by
vLLM but must agree with d2t: when it does not, one of the two maps is corrupt.
"""

from __future__ import annotations

from eagle_convert.validate.findings import Finding, finding
from eagle_convert.io.tensordata import read_array
from eagle_convert.validate.rules.context import Context

_INTS = {"I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64"}


def check(ctx: Context) -> list[Finding]:
    import numpy as np

    d2t_name = next((n for n in ctx.tensors if n in ("d2t", "model.d2t")), None)
    t2d_name = next((n for n in ctx.tensors if n in ("t2d", "model.t2d")), None)
    v = ctx.env.get("V") or (ctx.tensors[t2d_name].shape[0] if t2d_name and ctx.tensors[t2d_name].shape else None)
    vd = ctx.env.get("Vd")
    out: list[Finding] = []
    targets = None
    if d2t_name and _usable(ctx, d2t_name, _INTS):
        d2t = read_array(ctx.ckpt, d2t_name).astype(np.int64)
        targets = np.arange(len(d2t), dtype=np.int64) + d2t
        out += _check_d2t(d2t_name, targets, v)
    if t2d_name and _usable(ctx, t2d_name, _INTS | {"BOOL"}):
        t2d = read_array(ctx.ckpt, t2d_name) != 0
        out += _check_t2d(t2d_name, t2d, targets, v, vd)
    return out


def _usable(ctx: Context, name: str, dtypes: set[str]) -> bool:
    info = ctx.tensors[name]
    return info.dtype in dtypes and len(info.shape) == 1


def _check_d2t(name: str, targets, v: int | None) -> list[Finding]:
    import numpy as np

    out = []
    if not len(targets):
        return [finding("E404", f"{name} is empty", tensor=name)]
    if v is not None:
        bad = np.flatnonzero((targets < 0) | (targets >= v))
        if len(bad):
            i = int(bad[0])
            out.append(finding("E404", f"{name}: {len(bad)} draft ids map outside [0, {v}) (first: draft id {i} -> "
                                       f"target id {int(targets[i])}); vLLM's logit scatter fails at the first decode",
                               tensor=name))
    uniq, counts = np.unique(targets, return_counts=True)
    if len(uniq) != len(targets):
        dup = int(uniq[counts > 1][0])
        ids = np.flatnonzero(targets == dup)[:3].tolist()
        out.append(finding("E405", f"{name}: {len(targets) - len(uniq)} collisions, e.g. draft ids {ids} all map to "
                                   f"target id {dup} (is it absolute ids instead of offsets?)", tensor=name))
    elif np.any(np.diff(targets) <= 0):
        i = int(np.flatnonzero(np.diff(targets) <= 0)[0])
        out.append(finding("W406", f"{name}: target ids are not increasing (draft id {i + 1} -> {int(targets[i + 1])} "
                                   f"after {int(targets[i])})", tensor=name))
    return out


def _check_t2d(name: str, t2d, targets, v: int | None, vd: int | None) -> list[Finding]:
    import numpy as np

    problems = []
    if v is not None and len(t2d) != v:
        problems.append(f"length {len(t2d)} != vocab_size {v}")
    count = int(t2d.sum())
    if vd is not None and count != vd:
        problems.append(f"{count} entries set but draft_vocab_size is {vd}")
    if targets is not None:
        inside = (targets >= 0) & (targets < len(t2d))
        missing = np.flatnonzero(~t2d[np.clip(targets, 0, max(len(t2d) - 1, 0))] | ~inside) if len(t2d) else targets
        if len(missing):
            i = int(missing[0])
            problems.append(f"{len(missing)} d2t targets not set in t2d (first: draft id {i} -> {int(targets[i])})")
    if not problems:
        return []
    return [finding("E407", f"{name} disagrees with d2t / config: " + "; ".join(problems), tensor=name)]
