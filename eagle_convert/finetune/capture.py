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

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_convert.cache import SEQUENCES, CaptureOptions, CaptureResult, capture_cache, check_capture_options
from eagle_convert.extras import TORCH_MODULES, require
from eagle_convert.finetune.data import greedy_continuations, pad_token, render_training_prompts, target_tokenizer
from eagle_convert.finetune.options import FinetuneOptions
from eagle_convert.io import write_text_atomic
from eagle_convert.measure import Prompt, prompt_items, resolve_chat_template
from eagle_convert.progress import OnTick, Tick, tick_or_nothing

if TYPE_CHECKING:
    from eagle_convert.vllm_model import Release


def capture_training_data(
    draft: str | Path,
    target: str | Path,
    out: str | Path,
    data: FinetuneOptions | None = None,
    opts: CaptureOptions | None = None,
    *,
    prompts: Sequence[Prompt] | None = None,
    continuation_tokens: int | None = None,
    force: bool = False,
    say: Callable[[str], None] | None = None,
    on_tick: OnTick | None = None,
    session: Any = None,
    reference_target: Any = None,
    release: Release | None = None,
) -> CaptureResult:
    """Render the prompts, let the target continue them, and capture every sequence into ``out``.

    Args:
        draft: the draft whose aux ids and vocabulary the cache is for.
        target: the target model folder.
        out: the cache folder (a killed capture of the same data resumes).
        data: the prompts, chat template and continuation length (`FinetuneOptions`' data fields;
            the rest is unused). Default `FinetuneOptions()`.
        opts: the engine and its settings (default `CaptureOptions()`: vLLM).
        prompts: `Prompt`s instead of `data.prompts`.
        continuation_tokens: instead of `data.continuation_tokens` (at least 1 there): 0 captures the
            rendered prompts alone, the calibration data of `upgrade --init calibrated`.
        force: start over when ``out`` holds another capture.
        say: a line per phase.
        on_tick: counts of the continuations and of the shards (tokens/s).
        session: an open vLLM ``EngineSession`` (engine vllm); reference_target: a loaded target.
        release: the vLLM release the draft's aux ids are read for, from the calling command's
            entry (None: `capture` itself is the entry, and resolves the installed release here).

    Returns:
        The capture's result (manifest, shards captured by this run, tokens/s).

    Raises:
        CheckpointNotFoundError: no target or draft folder with a config.json (`draft.local_checkpoint`).
        NotADraftError: the draft is no draft, or the target is one.
        UsageError: bad options, no prompt fits, ``out`` holds another capture.
        MissingExtraError: torch/transformers (or vLLM for engine vllm) not installed.
        EngineError: vLLM failed.
    """
    d, o = data or FinetuneOptions(), opts or CaptureOptions()
    check_capture_options(o)
    require("smoke", "capture", TORCH_MODULES)  # the tokenizer renders the prompts
    from eagle_convert.draft import load_target, local_checkpoint
    from eagle_convert.vllm_model import default_release

    say = say or (lambda _m: None)
    tick = tick_or_nothing(on_tick)
    tdir, ddir = local_checkpoint(target, "target", "capture"), local_checkpoint(draft, "draft", "capture")
    n = d.continuation_tokens if continuation_tokens is None else continuation_tokens
    items, label = prompt_items(prompts if prompts is not None else d.prompts, option="--train-prompts", say=say)
    template, template_label = resolve_chat_template(d.chat_template)
    tokenizer = target_tokenizer(tdir, target, hint="capture renders the prompts with the target's tokenizer files")
    rendered = render_training_prompts(
        items,
        tokenizer,
        chat_template=template,
        template_label=template_label,
        prompts_label=label,
        context=load_target(tdir).max_position_embeddings,
        continuation_tokens=n,
        ttt_steps=d.ttt_steps,
    )
    say(f"capture: {o.engine} continues {len(rendered.token_ids)} prompts by {n} tokens")
    t0, stack = time.perf_counter(), ExitStack()
    if o.engine == "vllm":  # one max_model_len for the continuations and the capture: one engine
        o = replace(o, max_model_len=o.max_model_len or max(map(len, rendered.token_ids)) + n + 8)
        from eagle_convert.vllm import engine_session

        session = stack.enter_context(engine_session(session))  # the caller's, the one in use, or one closed below
    try:
        key = _data_key(tdir, o, rendered.token_ids, n)
        seqs = None if force else _saved_sequences(Path(out), key)
        if seqs is not None:
            say(f"capture: {len(seqs)} sequences from {Path(out) / SEQUENCES} (generated by an earlier run)")
        elif n == 0:  # calibration data: the rendered prompts alone
            seqs = [list(ids) for ids in rendered.token_ids]
        else:
            seqs, reference_target = _continue(
                tdir, o, rendered.token_ids, n, tokenizer, tick, session, reference_target
            )
            _save_sequences(Path(out), key, seqs)
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
            release=default_release() if release is None else release,  # None: capture's own entry
        )
    finally:
        stack.close()


def _continue(
    tdir: Path,
    o: CaptureOptions,
    prompts: list[list[int]],
    n: int,
    tokenizer: Any,
    tick: OnTick,
    session: Any,
    reference_target: Any,
) -> tuple[list[list[int]], Any]:
    """(each prompt + the engine's `n` greedy tokens, the reference target)."""
    total = len(prompts)
    if o.engine == "reference":
        if reference_target is None:
            from eagle_convert.reference import TargetModel, quiet_loading

            with quiet_loading():
                reference_target = TargetModel.from_pretrained(tdir, **_dtype(o.dtype))  # GPU if torch sees one
        seqs = greedy_continuations(
            reference_target,
            prompts,
            n,
            pad_token(tokenizer),
            lambda k: tick(Tick("continuations", k, total)),
        )
        return seqs, reference_target
    conts = session.continue_greedy(
        tdir,
        [(f"s{i}", ids) for i, ids in enumerate(prompts)],
        n,
        dtype=o.dtype,
        tensor_parallel_size=o.tensor_parallel_size,
        pipeline_parallel_size=o.pipeline_parallel_size,
        max_model_len=o.max_model_len,
    )
    tick(Tick("continuations", total, total))
    return [ids + conts[f"s{i}"] for i, ids in enumerate(prompts)], reference_target


def _data_key(tdir: Path, o: CaptureOptions, prompts: list[list[int]], n: int) -> str:
    """What decides the generated sequences: the target, the engine and its dtype and parallelism,
    the rendered prompts, the continuation length."""
    what = [str(tdir), o.engine, o.dtype, o.tensor_parallel_size, o.pipeline_parallel_size, prompts, n]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()


def _saved_sequences(out: Path, key: str) -> list[list[int]] | None:
    try:
        saved = json.loads((out / SEQUENCES).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("key") != key:
        return None
    return [[int(t) for t in s] for s in saved["sequences"]]


def _save_sequences(out: Path, key: str, seqs: list[list[int]]) -> None:
    """Beside the manifest; never into a folder that is not a cache (capture_cache refuses it next)."""
    from eagle_convert.cache import MANIFEST

    if out.is_dir() and any(out.iterdir()) and not any((out / n).exists() for n in (MANIFEST, SEQUENCES)):
        return
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / SEQUENCES, json.dumps({"key": key, "sequences": seqs}) + "\n")


def _dtype(name: str) -> dict[str, Any]:
    if name == "auto":
        return {}  # the reference engine's own fp32
    import torch

    return {"dtype": getattr(torch, name)}
