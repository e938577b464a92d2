"""Expand `schemas/tensors.json` into the exact tensors vLLM's draft class builds for one config.

The result maps each vLLM-side name (`layers.0.mlp.down_proj.weight`) to its expected shape (with
None for a dimension the config does not determine), kind, and whether vLLM has a parameter for it
and needs it; the keys and shapes rules both read this one expansion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from eagle_convert.draft import load_schema
from eagle_convert.validate.rules.context import Context
from eagle_convert.validate.rules.expr import evaluate
from eagle_convert.vllm_model import MAX_COUNT

_LAYER_RE = re.compile(r"^layers\.(\d+)\.")


@dataclass(frozen=True)
class Expected:
    name: str
    shape: tuple[int | None, ...]
    formula: tuple[str, ...]
    kind: str  # linear | norm | embedding | bias | index
    exists: bool | None  # vLLM has a parameter for it (None: unknown, treat as yes)
    required: bool | None  # absence is a finding (None: unknown, do not report)
    missing: str  # finding code when absent
    unexpected: str  # finding code when present but `exists` is false


def _one(spec: dict, name: str, env: dict) -> Expected:
    exists = evaluate(spec.get("exists", "True"), env)
    required = evaluate(spec["required"], env) if "required" in spec else exists
    shape = tuple(evaluate(f, env) for f in spec["shape"])
    return Expected(
        name,
        shape,
        tuple(spec["shape"]),
        spec["kind"],
        exists,
        bool(required) if required is not None else None,
        spec.get("missing", "E101"),
        spec.get("unexpected", "E102"),
    )


def expected_tensors(ctx: Context, **overrides: int | None) -> dict[str, Expected]:
    """vLLM-side name -> Expected, for every name vLLM's module tree could hold for this config
    (`overrides` replace symbols, e.g. A as the weights say when the config disagrees).

    A pure function of the symbols and the attention kind (the tensor names are the checkpoint's),
    so the releases of one matrix that read the config alike expand it once (`Context.memo`).
    """
    env = dict(ctx.env) | overrides
    try:
        key = ("expected_tensors", ctx.attention, frozenset(env.items()))
    except TypeError:  # an unhashable symbol value: expand without the memo
        return _per_release(ctx, _expand(ctx, env))
    return _per_release(ctx, dict(ctx.memo(key, lambda: _expand(ctx, env))))  # a copy: callers may not share one


def _per_release(ctx: Context, out: dict[str, Expected]) -> dict[str, Expected]:
    """What `tensors.json` (the newest releases' module tree) does not hold for older releases."""
    d2t = out.get("d2t")
    if d2t is not None and not d2t.exists and not ctx.release.has("d2t_only_reduced"):
        # Up to 0.29.0 every class builds draft_id_to_target_id, full vocabulary or not
        # (llama_eagle3.py Eagle3LlamaForCausalLM.__init__, 0.29.0 vs 0.30.0).
        out["d2t"] = replace(d2t, exists=True)
    return out


def _expand(ctx: Context, env: dict) -> dict[str, Expected]:
    data = load_schema("tensors.json")
    out: dict[str, Expected] = {}
    for spec in data["tensors"]:
        if "for" in spec:
            count = env.get(spec["for"])
            for i in range(min(count or 0, MAX_COUNT)):
                name = spec["name"].format(i=i)
                out[name] = _one(spec, name, env)
        else:
            out[spec["name"]] = _one(spec, spec["name"], env)
    layers = env.get("L")
    if layers is None:  # unknown layer count: expect the layers the checkpoint has
        layers = 1 + max((int(m.group(1)) for n in ctx.vnames.values() if n and (m := _LAYER_RE.match(n))), default=0)
    layers = min(layers, MAX_COUNT)
    h = env.get("H")
    per_layer = data["layer"] + data["attention"][ctx.attention]
    for k in range(layers):
        lenv = env | {"k": k, "in0": (2 * h if k == 0 else h) if h else None}
        for spec in per_layer:
            name = f"layers.{k}.{spec['name']}"
            out[name] = _one(spec, name, lenv)
    return out
