"""`smoke`: acceptance length and per-position acceptance of EAGLE-3 drafts against a target.

Pure orchestration that returns data: prompts are rendered and tokenized once (`prompts.py`), each
draft decodes them with the reference engine (torch, `reference/`) or vLLM (`vllm_smoke.py`, one
engine start per draft), and the counters are summed per draft x category x context bucket.

Definitions follow vLLM 0.32.0 (`v1/spec_decode/metrics.py`, `SpecDecodingLogging.log`): AL =
1 + accepted / drafts, the rate at position i = rounds whose first i+1 drafts were accepted / rounds,
acceptance rate = accepted / draft tokens.
Target forward passes per request = 1 (prefill) + draft rounds.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.errors import CheckpointNotFoundError, EngineError, UsageError
from eagle_convert.extras import require
from eagle_convert.smoke.prompts import (
    NATURAL,
    Prompt,
    PromptSet,
    builtin_prompts,
    prepare_prompts,
    resolve_chat_template,
)
from eagle_convert.vllm_model.acceptance import AcceptanceMetrics

__all__ = [
    "ENGINES",
    "Counts",
    "Group",
    "RequestResult",
    "DraftResult",
    "Delta",
    "SmokeReport",
    "default_engine",
    "run_smoke",
    "counts_from_histogram",
    "prepare_smoke_prompts",
    "draft_results",
    "deltas",
    "counts_from_pass",
]

LOG = logging.getLogger(__name__)
ENGINES = ("reference", "vllm")
# What every smoke run imports (the tokenizer, and torch for either engine); --plot adds matplotlib.
SMOKE_MODULES = ("torch", "transformers", "tokenizers")


@dataclass
class Counts(AcceptanceMetrics):
    """Summed spec-decode counters; `seconds` None where the engine has no per-request time."""

    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    target_forwards: int = 0
    seconds: float | None = 0.0

    def add(self, o: Counts) -> None:
        self.requests += o.requests
        self.prompt_tokens += o.prompt_tokens
        self.generated_tokens += o.generated_tokens
        self.add_counters(o)
        self.target_forwards += o.target_forwards
        self.seconds = None if self.seconds is None or o.seconds is None else self.seconds + o.seconds

    @property
    def per_position(self) -> list[float]:
        return self.per_position_rate

    @property
    def tokens_per_forward(self) -> float:
        return self.generated_tokens / self.target_forwards if self.target_forwards else 0.0

    @property
    def tokens_per_s(self) -> float | None:
        return self.generated_tokens / self.seconds if self.seconds else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "acceptance_length": round(self.acceptance_length, 4),
            "acceptance_rate": round(self.acceptance_rate, 4),
            "per_position": [round(r, 4) for r in self.per_position],
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "num_drafts": self.num_drafts,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted": self.num_accepted,
            "accepted_per_pos": list(self.accepted_per_pos),
            "target_forwards": self.target_forwards,
            "tokens_per_forward": round(self.tokens_per_forward, 4),
            "seconds": None if self.seconds is None else round(self.seconds, 4),
            "tokens_per_s": None if self.tokens_per_s is None else round(self.tokens_per_s, 2),
        }


def counts_from_histogram(histogram: Sequence[int], num_draft_tokens: int, *, k: int) -> Counts:
    """Counters of one request from vLLM's per-request histogram (index j = drafts accepted in a
    round). In a chain, position i is accepted in every round that accepted more than i drafts."""
    rounds = sum(histogram)
    return Counts(
        requests=1,
        num_drafts=rounds,
        num_draft_tokens=int(num_draft_tokens),
        num_accepted=sum(j * c for j, c in enumerate(histogram)),
        accepted_per_pos=[sum(histogram[i + 1 :]) for i in range(k)],
        target_forwards=rounds + 1,
        seconds=None,
    )


@dataclass
class RequestResult:
    prompt_id: str
    category: str
    bucket: int
    counts: Counts | None  # None: the engine gave only totals


@dataclass
class Group:
    category: str  # a category or "all"
    bucket: int | None  # a bucket, or None for all buckets
    counts: Counts


@dataclass
class DraftResult:
    label: str
    path: str
    variant: str | None
    total: Counts
    groups: list[Group]
    requests: list[RequestResult]
    per_request: bool  # whether category / bucket groups are available
    load_seconds: float | None = None
    sampling_control: Any = None  # smoke.control.SamplingControl of this draft's engine (vLLM, T > 0)

    def group(self, category: str, bucket: int | None) -> Counts | None:
        return next((g.counts for g in self.groups if g.category == category and g.bucket == bucket), None)


@dataclass
class Delta:
    """`draft` minus the first (baseline) draft; per group where both have one."""

    draft: str
    baseline: str
    acceptance_length: float
    acceptance_rate: float
    per_position: list[float]
    tokens_per_s_ratio: float | None
    groups: list[tuple[str, int | None, float]]  # (category, bucket, ΔAL)


@dataclass
class SmokeReport:
    target: str
    engine: str
    engine_version: str | None
    settings: dict[str, Any]
    prompts: PromptSet
    drafts: list[DraftResult]
    deltas: list[Delta]
    seconds: float = 0.0
    throughput: Any = None  # smoke.throughput.ThroughputReport (vLLM with concurrency levels)

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(p.category for p in self.prompts.prompts))

    @property
    def buckets(self) -> list[int]:
        return sorted({p.bucket for p in self.prompts.prompts})

    def to_dict(self) -> dict[str, Any]:
        def grp(g: Group) -> dict[str, Any]:
            return {"category": g.category, "bucket": g.bucket, **g.counts.to_dict()}

        return {
            "target": self.target,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "settings": self.settings,
            "seconds": round(self.seconds, 3),
            "prompts": {
                "chat_template": self.prompts.chat_template,
                "count": len(self.prompts.prompts),
                "items": [
                    {
                        "id": p.id,
                        "category": p.category,
                        "bucket": p.bucket,
                        "prompt_tokens": p.num_tokens,
                        "filler_words": p.filler_words,
                    }
                    for p in self.prompts.prompts
                ],
                "skipped": [vars(s) for s in self.prompts.skipped],
            },
            "drafts": [
                {
                    "label": d.label,
                    "path": d.path,
                    "variant": d.variant,
                    "per_request": d.per_request,
                    "load_seconds": d.load_seconds,
                    "total": d.total.to_dict(),
                    "sampling_control": d.sampling_control.to_dict() if d.sampling_control is not None else None,
                    "groups": [grp(g) for g in d.groups],
                    "requests": [
                        {
                            "id": r.prompt_id,
                            "category": r.category,
                            "bucket": r.bucket,
                            **(r.counts.to_dict() if r.counts else {}),
                        }
                        for r in d.requests
                    ],
                }
                for d in self.drafts
            ],
            "deltas": [
                {
                    "draft": x.draft,
                    "baseline": x.baseline,
                    "acceptance_length": round(x.acceptance_length, 4),
                    "acceptance_rate": round(x.acceptance_rate, 4),
                    "per_position": [round(v, 4) for v in x.per_position],
                    "tokens_per_s_ratio": None if x.tokens_per_s_ratio is None else round(x.tokens_per_s_ratio, 3),
                    "groups": [{"category": c, "bucket": b, "acceptance_length": round(v, 4)} for c, b, v in x.groups],
                }
                for x in self.deltas
            ],
            "throughput": self.throughput.to_dict() if self.throughput is not None else None,
        }


# ------------------------------------------------------------------------------- helpers


def default_engine() -> str:
    """vllm when it is importable and a GPU is present, else the reference engine."""
    from eagle_convert.vllm_model.features import vllm_available

    if not vllm_available():
        return "reference"
    import torch

    return "vllm" if torch.cuda.is_available() else "reference"


def _local_dir(path: str | Path, what: str) -> Path:
    """A local folder with a config.json: at the target's root; for a draft wherever the reader
    every command uses finds it (root, `model/`, `model/consolidated/`), with its weights."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise CheckpointNotFoundError(f"{what} {path}: no such folder (smoke needs a local checkpoint folder)")
    from eagle_convert.draft.kind import ensure_draft, ensure_target_config

    swap = "did you swap TARGET and --draft?"
    if what == "draft":
        from eagle_convert.draft.checkpoint import open_checkpoint

        ckpt = open_checkpoint(p)
        has_config = ckpt.has_config
        if has_config:  # a target, MTP head, Medusa ... or a P-EAGLE draft: one line, exit 1
            ensure_draft(ckpt, "smoke", swap=swap)
    else:
        has_config = (p / "config.json").is_file()
        if has_config:
            ensure_target_config(json.loads((p / "config.json").read_text()), f"target {path}", swap=swap)
    if not has_config:
        raise CheckpointNotFoundError(f"{what} {path}: no config.json")
    return p.resolve()


def _labels(paths: Sequence[Path]) -> list[str]:
    names = [p.name for p in paths]
    return [n if names.count(n) == 1 else f"{n}#{i + 1}" for i, n in enumerate(names)]


def _variant(path: Path) -> str | None:
    try:
        from eagle_convert.draft.checkpoint import open_checkpoint
        from eagle_convert.draft.describe import describe

        return describe(open_checkpoint(path), read_vocab=False).variant
    except Exception as exc:  # a label only: the engines report real load problems
        LOG.debug("variant of %s unknown: %s", path, exc)
        return None


def _target_context(target: Path) -> int | None:
    cfg = json.loads((target / "config.json").read_text())
    n = cfg.get("max_position_embeddings") or cfg.get("text_config", {}).get("max_position_embeddings")
    return int(n) if n else None


def _group(d_requests: list[RequestResult], categories: list[str], buckets: list[int]) -> list[Group]:
    groups: list[Group] = []
    keys: list[tuple[str, int | None]] = [(c, b) for c in categories for b in buckets]
    if len(buckets) > 1:  # otherwise these repeat the rows above and the draft total
        keys += [(c, None) for c in categories] + [("all", b) for b in buckets]
    for cat, bucket in keys:
        sel = [
            r.counts
            for r in d_requests
            if r.counts is not None and cat in ("all", r.category) and bucket in (None, r.bucket)
        ]
        if sel:
            total = Counts(accepted_per_pos=[])
            for c in sel:
                total.add(c)
            groups.append(Group(cat, bucket, total))
    return groups


def draft_results(
    paths: Sequence[Path], raw: _EngineOut, pset: PromptSet, labels: Sequence[str] | None = None
) -> list[DraftResult]:
    """One DraftResult per draft from an engine's request results and totals (groups where the
    engine gave per-request counters)."""
    categories = list(dict.fromkeys(p.category for p in pset.prompts))
    bucket_ids = sorted({p.bucket for p in pset.prompts})
    out = []
    for path, label_, (reqs, total, load_s) in zip(paths, labels or _labels(paths), raw):
        per_request = all(r.counts is not None for r in reqs)
        groups = _group(reqs, categories, bucket_ids) if per_request else []
        out.append(DraftResult(label_, str(path), _variant(path), total, groups, reqs, per_request, load_s))
    return out


def deltas(drafts: list[DraftResult]) -> list[Delta]:
    """Every draft after the first minus the first (the baseline)."""
    if len(drafts) < 2:
        return []
    base = drafts[0]
    out = []
    for d in drafts[1:]:
        tps_b, tps_d = base.total.tokens_per_s, d.total.tokens_per_s
        groups = []
        for g in d.groups:
            b = base.group(g.category, g.bucket)
            if b is not None:
                groups.append((g.category, g.bucket, g.counts.acceptance_length - b.acceptance_length))
        pp = [x - y for x, y in zip(d.total.per_position, base.total.per_position)]
        out.append(
            Delta(
                d.label,
                base.label,
                d.total.acceptance_length - base.total.acceptance_length,
                d.total.acceptance_rate - base.total.acceptance_rate,
                pp,
                tps_d / tps_b if tps_b and tps_d else None,
                groups,
            )
        )
    return out


_deltas = deltas  # the name tests/test_smoke.py imports


# ------------------------------------------------------------------------------- engines

# Per draft: the request results, the engine's totals, and the draft-load / engine-start seconds.
_EngineOut = list[tuple[list[RequestResult], Counts, float | None]]


def _run_reference(
    target: Path,
    drafts: list[Path],
    prompts: PromptSet,
    *,
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    say: Callable[[str], None],
    device: str | None = None,
) -> tuple[_EngineOut, str]:
    import torch

    from eagle_convert.reference.data import load_drafter
    from eagle_convert.reference.loop import speculative_generate
    from eagle_convert.reference.target import TargetModel
    from eagle_convert.vllm_model.tables import default_aux_ids

    tgt = TargetModel.from_pretrained(target, device=device)  # device None: GPU if torch sees one
    results: _EngineOut = []
    for path in drafts:
        say(f"smoke: {path.name}: {len(prompts.prompts)} runs x {max_new_tokens} tokens (reference engine)")
        t0 = time.perf_counter()
        try:
            drafter = load_drafter(
                path, target_embed=tgt.embed_weight, target_lm_head=tgt.lm_head_weight, device=tgt.device
            )
        except (ValueError, KeyError, RuntimeError) as exc:
            raise EngineError(f"reference engine cannot load draft {path}: {exc}") from None
        cfg = getattr(drafter, "cfg", None)
        aux = tuple(getattr(cfg, "aux_layer_ids", None) or default_aux_ids(tgt.num_layers))
        load_s = time.perf_counter() - t0
        # Warm-up (lazy torch init, first-call allocations) so the first prompt's tokens/s is not skewed.
        first = prompts.prompts[0].token_ids
        speculative_generate(
            tgt, drafter, first[:32], k=k, max_new_tokens=2, temperature=temperature, seed=seed, aux_ids=aux
        )
        reqs, total = [], Counts(accepted_per_pos=[0] * k)
        for p in prompts.prompts:
            try:
                r = speculative_generate(
                    tgt,
                    drafter,
                    p.token_ids,
                    k=k,
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    seed=seed,
                    aux_ids=aux,
                )
            except (ValueError, RuntimeError, IndexError) as exc:  # shape mismatches with the target
                raise EngineError(f"reference engine failed on draft {path}, prompt {p.id!r}: {exc}") from None
            c = Counts(
                requests=1,
                prompt_tokens=p.num_tokens,
                generated_tokens=len(r.tokens),
                num_drafts=r.num_drafts,
                num_draft_tokens=r.num_draft_tokens,
                num_accepted=r.num_accepted,
                accepted_per_pos=list(r.accepted_per_pos),
                target_forwards=r.target_forwards,
                seconds=r.seconds,
            )
            total.add(c)
            reqs.append(RequestResult(p.id, p.category, p.bucket, c))
        results.append((reqs, total, load_s))
    return results, f"torch {torch.__version__} on {tgt.device.type}"


def _run_vllm(
    target: Path,
    drafts: list[Path],
    prompts: PromptSet,
    *,
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    tensor_parallel_size: int,
    say: Callable[[str], None],
) -> tuple[_EngineOut, str, list]:
    """One vLLM worker, one engine start per draft; at T > 0 each engine also runs the T -> 0
    sampling control (smoke/vllm_run.py)."""
    from eagle_convert.smoke.vllm_run import run_vllm_drafts

    runs, version, controls = run_vllm_drafts(
        target,
        drafts,
        prompts,
        k=k,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        tensor_parallel_size=tensor_parallel_size,
        say=say,
    )
    return [(*counts_from_pass(pr, prompts, k), start_s) for pr, start_s in runs], version, controls


def counts_from_pass(pr: Any, pset: PromptSet, k: int) -> tuple[list[RequestResult], Counts]:
    """Engine totals and per-request counters (vLLM's per-request histograms) of one vLLM pass
    (`vllm.session.PassResult`)."""
    prompts = [pset.prompts[i] for i in pr.prompts]
    total = Counts(
        requests=len(pr.outputs),
        prompt_tokens=sum(p.num_tokens for p in prompts),
        generated_tokens=sum(len(o) for o in pr.outputs),
        num_drafts=pr.num_drafts,
        num_draft_tokens=pr.num_draft_tokens,
        num_accepted=pr.num_accepted,
        accepted_per_pos=list(pr.accepted_per_pos) or [0] * k,
        target_forwards=pr.num_drafts + len(pr.outputs),
        seconds=pr.seconds,
    )
    reqs = []
    for i, p in enumerate(prompts):
        m = pr.per_request[i] if pr.per_request and i < len(pr.per_request) else None
        c = None
        if m:
            c = counts_from_histogram(
                m.get("acceptance_histogram", m.get("histogram")), m.get("num_draft_tokens", 0), k=k
            )
            c.prompt_tokens, c.generated_tokens = p.num_tokens, len(pr.outputs[i])
        reqs.append(RequestResult(p.id, p.category, p.bucket, c))
    return reqs, total


# ---------------------------------------------------------------------------------- main


def prepare_smoke_prompts(
    target_dir: Path,
    prompts: Sequence[Prompt] | None,
    *,
    k: int,
    max_new_tokens: int,
    buckets: Sequence[int] = (NATURAL,),
    chat_template: str | None = None,
) -> PromptSet:
    """Render and tokenize `prompts` (None: the built-in set) with the target's tokenizer, leaving
    room for `max_new_tokens` and one draft round in its context."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    template, label = resolve_chat_template(chat_template)
    ctx = _target_context(target_dir)
    room = None if ctx is None else ctx - max_new_tokens - k - 1
    if room is not None and room < 16:
        raise UsageError(
            f"--max-new-tokens {max_new_tokens} leaves no room for a prompt in the target's context ({ctx})"
        )
    pset = prepare_prompts(
        list(prompts) if prompts is not None else builtin_prompts(),
        tokenizer,
        buckets=buckets,
        chat_template=template,
        template_label=label,
        max_prompt_tokens=room,
    )
    if not pset.prompts:
        raise UsageError("no prompt fits the requested buckets (see --buckets)")
    return pset


def run_smoke(
    target: str | Path,
    drafts: Sequence[str | Path],
    *,
    engine: str | None = None,
    prompts: Sequence[Prompt] | None = None,
    k: int = 3,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
    buckets: Sequence[int] = (NATURAL,),
    chat_template: str | None = None,
    tensor_parallel_size: int = 1,
    progress: Callable[[str], None] | None = None,
    device: str | None = None,
    concurrency: Sequence[int] = (),
) -> SmokeReport:
    """Measure every draft on the same tokenized prompts; the first draft is the baseline of the
    differences. `engine` None picks `default_engine()`; `chat_template` is a --chat-template value;
    `progress` receives one line per draft started; `device` ("cpu", "cuda", ...) places the
    reference engine (None: "cuda" when torch sees a GPU, else "cpu"); `concurrency` levels (vLLM
    only) add per-user tokens/s with each draft and without speculation (`smoke/throughput.py`)."""
    t0 = time.perf_counter()
    require("smoke", "smoke", SMOKE_MODULES)  # before default_engine(), which imports torch
    engine = engine or default_engine()
    for bad, message in (
        (not drafts, "give at least one --draft"),
        (engine not in ENGINES, f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})"),
        (k < 1, "--num-speculative-tokens must be at least 1"),
        (max_new_tokens < 1, "--max-new-tokens must be at least 1"),
        (temperature < 0, "--temperature must be >= 0"),
        (tensor_parallel_size < 1, "--tensor-parallel-size must be at least 1"),
        (engine == "reference" and tensor_parallel_size != 1, "--tensor-parallel-size applies to --engine vllm only"),
        (engine == "vllm" and device is not None, "a device applies to --engine reference only"),
        (bool(concurrency) and engine != "vllm", "--concurrency measures per-user tokens/s with --engine vllm only"),
    ):
        if bad:
            raise UsageError(message)
    if engine == "vllm":
        require("vllm", "smoke --engine vllm")
    tdir = _local_dir(target, "target")
    dpaths = [_local_dir(d, "draft") for d in drafts]

    pset = prepare_smoke_prompts(
        tdir, prompts, k=k, max_new_tokens=max_new_tokens, buckets=buckets, chat_template=chat_template
    )
    label = pset.chat_template

    say = progress or (lambda _msg: None)
    kw: dict[str, Any] = dict(k=k, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, say=say)
    controls: list = []
    throughput = None
    if engine == "reference":
        raw, version = _run_reference(tdir, dpaths, pset, device=device, **kw)
    elif concurrency:
        from eagle_convert.smoke.vllm_measure import measure_for_smoke

        runs, version, controls, throughput = measure_for_smoke(
            tdir,
            dpaths,
            pset,
            labels=_labels(dpaths),
            concurrency=concurrency,
            tensor_parallel_size=tensor_parallel_size,
            **kw,
        )
        raw = [(*counts_from_pass(pr, pset, k), start_s) for pr, start_s in runs]
    else:
        raw, version, controls = _run_vllm(tdir, dpaths, pset, tensor_parallel_size=tensor_parallel_size, **kw)

    results = draft_results(dpaths, raw, pset)
    for d, control in zip(results, controls):
        d.sampling_control = control
    settings = {
        "k": k,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "seed": seed,
        "buckets": list(buckets),
        "chat_template": label,
        "tensor_parallel_size": tensor_parallel_size,
        "ignore_eos": True,
    }
    return SmokeReport(
        str(tdir), engine, version, settings, pset, results, deltas(results), time.perf_counter() - t0, throughput
    )
