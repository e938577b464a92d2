"""`capture`: the fine-tune's training data made and cached once, so training needs no target.

The prompts are rendered as `finetune` renders them (the serving template), the target continues
each greedily (`--continuation-tokens`, EOS ignored), and `cache.capture_cache` stores the target's
aux states and logits of every whole sequence. The engine does both: vLLM (one engine start, the
target tensor parallel if asked) or the reference target. With ``engine="reference"`` the
sequences are exactly online `finetune`'s (the same fp32 target, the same batched `generate`), so
`finetune --cache` trains on what an online fine-tune would; vLLM's bf16 continuations may differ
from those after a near tie, which changes the data, not the method.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from eagle_convert.cache import CaptureOptions, CaptureResult, capture_cache, check_capture_options
from eagle_convert.errors import CheckpointNotFoundError, CheckpointReadError
from eagle_convert.extras import require
from eagle_convert.finetune.data import greedy_continuations, pad_token, render_training_prompts
from eagle_convert.finetune.options import FinetuneOptions
from eagle_convert.measure import Prompt, prompt_items, resolve_chat_template
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

__all__ = ["capture_training_data"]

CAPTURE_MODULES = ("torch", "transformers", "tokenizers")


def capture_training_data(
    draft: str | Path,
    target: str | Path,
    out: str | Path,
    data: FinetuneOptions | None = None,
    opts: CaptureOptions | None = None,
    *,
    prompts: Sequence[Prompt] | None = None,
    force: bool = False,
    say: Callable[[str], None] | None = None,
    on_tick: OnTick | None = None,
    session: Any = None,
    reference_target: Any = None,
) -> CaptureResult:
    """Render the prompts, let the target continue them, and capture every sequence into ``out``.

    Args:
        draft: the draft whose aux ids and vocabulary the cache is for.
        target: the target model folder.
        out: the cache folder (a killed capture of the same data resumes).
        data: the prompts, chat template and continuation length (`FinetuneOptions`' data fields;
            the rest is unused; `continuation_tokens` 0 captures the rendered prompts alone, the
            calibration data of `upgrade --init calibrated`). Default `FinetuneOptions()`.
        opts: the engine and its settings (default `CaptureOptions()`: vLLM).
        prompts: `Prompt`s instead of `data.prompts`.
        force: start over when ``out`` holds another capture.
        say: a line per phase.
        on_tick: counts of the continuations and of the shards (tokens/s).
        session: an open vLLM ``EngineSession`` (engine vllm); reference_target: a loaded target.

    Returns:
        The capture's result (manifest, shards captured by this run, tokens/s).

    Raises:
        CheckpointNotFoundError: no target or draft folder with a config.json.
        UsageError: bad options, no prompt fits, ``out`` holds another capture.
        MissingExtraError: torch/transformers (or vLLM for engine vllm) not installed.
        EngineError: vLLM failed.
    """
    d, o = data or FinetuneOptions(), opts or CaptureOptions()
    check_capture_options(o)
    require("smoke", "capture", CAPTURE_MODULES)  # the tokenizer renders the prompts
    from transformers import AutoTokenizer

    from eagle_convert.draft import load_target

    say = say or (lambda _m: None)
    tick = tick_or_nothing(on_tick)
    tdir, ddir = _folder(target, "target"), _folder(draft, "draft")
    items, label = prompt_items(prompts if prompts is not None else d.prompts)
    template, template_label = resolve_chat_template(d.chat_template)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tdir))
    except (OSError, ValueError) as exc:
        raise CheckpointReadError(
            f"target {target}: transformers cannot load its tokenizer ({exc})".split("\n")[0],
            hint="capture renders the prompts with the target's tokenizer files",
        ) from None
    rendered = render_training_prompts(
        items,
        tokenizer,
        chat_template=template,
        template_label=template_label,
        prompts_label=label,
        context=load_target(tdir).max_position_embeddings,
        continuation_tokens=d.continuation_tokens,
        ttt_steps=d.ttt_steps,
    )
    n, total = d.continuation_tokens, len(rendered.token_ids)
    say(f"capture: {o.engine} continues {total} prompts by {n} tokens")
    t0 = time.perf_counter()
    own = None
    try:
        if n == 0:  # calibration data: the rendered prompts alone
            seqs = [list(ids) for ids in rendered.token_ids]
        elif o.engine == "reference":
            if reference_target is None:
                from eagle_convert.reference import TargetModel, quiet_loading

                with quiet_loading():
                    reference_target = TargetModel.from_pretrained(tdir, device="cpu", **_dtype(o.dtype))
            seqs = greedy_continuations(
                reference_target,
                rendered.token_ids,
                n,
                pad_token(tokenizer),
                lambda k: tick(Tick("capture: target continuations", k, total, "prompts")),
            )
        else:
            if session is None:
                from eagle_convert.vllm import EngineSession

                session = own = EngineSession()
            # the capture after this reuses the engine only with the very same settings
            o = replace(o, max_model_len=o.max_model_len or max(map(len, rendered.token_ids)) + n + 8)
            conts = session.continue_greedy(
                tdir,
                [(f"s{i}", ids) for i, ids in enumerate(rendered.token_ids)],
                n,
                dtype=o.dtype,
                tensor_parallel_size=o.tensor_parallel_size,
                pipeline_parallel_size=o.pipeline_parallel_size,
                max_model_len=o.max_model_len,
            )
            seqs = [ids + conts[f"s{i}"] for i, ids in enumerate(rendered.token_ids)]
            tick(Tick("capture: target continuations", total, total, "prompts"))
        say(f"capture: continuations in {time.perf_counter() - t0:.1f}s; capturing {len(seqs)} sequences")
        cont = f"target greedy ({o.engine}), {n} tokens" if n else "none"
        prov = [{**p, "continuation": cont} for p in rendered.provenance]
        return capture_cache(
            tdir,
            ddir,
            seqs,
            Path(out),
            o,
            provenance=prov,
            force=force,
            on_tick=on_tick,
            session=session,
            reference_target=reference_target,
        )
    finally:
        if own is not None:
            own.close()


def _dtype(name: str) -> dict[str, Any]:
    if name == "auto":
        return {}  # the reference engine's own fp32
    import torch

    return {"dtype": getattr(torch, name)}


def _folder(path: str | Path, what: str) -> Path:
    p = Path(path).expanduser()
    if not (p / "config.json").is_file():
        raise CheckpointNotFoundError(f"{what} {path}: no config.json in a local folder (capture runs it locally)")
    return p.resolve()
