"""The fine-tune's training data: prompts rendered with the serving template, then the target's own
greedy continuation of each; shared by online `finetune` and by `capture` (which then caches the
target's features of exactly these sequences, so training from the cache sees the same data).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle_convert.errors import CheckpointReadError, UsageError
from eagle_convert.measure import Prompt

GENERATE_BATCH = 8  # prompts the reference target continues in one `generate` call


@dataclass
class RenderedPrompts:
    """Token ids of every prompt that fits, with where each came from (the cache's provenance)."""

    token_ids: list[list[int]]
    provenance: list[dict[str, Any]]


def target_tokenizer(tdir: Path, target: str | Path, *, hint: str, options: tuple[str, ...] = ()) -> Any:
    """The target's tokenizer; files transformers cannot read are a one-line error with `hint`, not a traceback."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(tdir))
    except (OSError, ValueError) as exc:
        raise CheckpointReadError(
            f"target {target}: transformers cannot load its tokenizer ({exc})".split("\n")[0],
            hint=hint,
            options=options,
        ) from None


def render_training_prompts(
    items: Sequence[Prompt],
    tokenizer: Any,
    *,
    chat_template: str | None,
    template_label: str,
    prompts_label: str,
    context: int | None,
    continuation_tokens: int,
    ttt_steps: int,
) -> RenderedPrompts:
    """Render `items` (the serving template) and keep those that leave room for the continuation.

    Args:
        items: the prompts.
        tokenizer: the target's tokenizer.
        chat_template: a resolved --chat-template (None: the target's).
        template_label: how the template is named in provenance.
        prompts_label: the prompt set's label (file or "built-in").
        context: the target's max_position_embeddings (None: no limit).
        continuation_tokens: tokens the target adds after each prompt (0: calibration data, the
            prompts alone, which may then fill the whole context).
        ttt_steps: TTT depth (the trainer reads that many positions past the end).

    Returns:
        The token ids and the provenance of each kept prompt.

    Raises:
        UsageError: no prompt fits the target's context.
    """
    from eagle_convert.measure import prepare_prompts

    room = (
        None if context is None else int(context) - (continuation_tokens + ttt_steps + 1 if continuation_tokens else 0)
    )
    pset = prepare_prompts(
        items, tokenizer, chat_template=chat_template, template_label=template_label, max_prompt_tokens=room
    )
    if not pset.prompts:
        raise UsageError(
            "no prompt fits the target's context with {continuation_tokens}", options=("continuation_tokens",)
        )
    prov = [
        {"prompts": prompts_label, "id": p.id, "category": p.category, "chat_template": template_label}
        for p in pset.prompts
    ]
    return RenderedPrompts([list(p.token_ids) for p in pset.prompts], prov)


def greedy_continuations(
    tgt: Any, prompts: list[list[int]], n: int, pad: int, each: Callable[[int], None] | None = None
) -> list[list[int]]:
    """`n` greedy reference-target tokens after every prompt: prompts of similar length share a
    left-padded `generate` batch; `each(done)` after each batch."""
    seqs: list[list[int]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # similar lengths share a batch
    for start in range(0, len(order), GENERATE_BATCH):
        idx = order[start : start + GENERATE_BATCH]
        for i, cont in zip(idx, _greedy_batch(tgt, [prompts[i] for i in idx], n, pad)):
            seqs[i] = prompts[i] + cont
        if each is not None:
            each(min(start + GENERATE_BATCH, len(order)))
    return seqs


def _greedy_batch(tgt: Any, prompts: list[list[int]], n: int, pad: int) -> list[list[int]]:
    """`n` greedy target tokens after each prompt, one left-padded `generate` for the batch (EOS
    does not stop it: every continuation has `n` tokens, as the one-prompt loop produced)."""
    import torch

    t = max(map(len, prompts))
    ids = torch.full((len(prompts), t), pad, dtype=torch.long)
    mask = torch.zeros(len(prompts), t, dtype=torch.long)
    for j, p in enumerate(prompts):
        ids[j, t - len(p) :] = torch.tensor(p)
        mask[j, t - len(p) :] = 1
    with torch.no_grad():
        out = tgt.model.generate(
            input_ids=ids.to(tgt.device),
            attention_mask=mask.to(tgt.device),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            pad_token_id=pad,
        )
    return out[:, t:].tolist()


def pad_token(tokenizer: Any) -> int:
    """The id `generate` pads with: the tokenizer's pad token, else EOS, else 0."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
