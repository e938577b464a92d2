"""`FinetuneOptions`: every setting of a fine-tune, declared once with its help text and bounds.

The `finetune` command's click options, report's fine-tune options and its `finetune` line in
`commands.sh` are all made from these fields (`optionspec`); `plan_finetune` and `finetune_draft`
take the object, so the settings are no longer copied from one signature to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.optionspec import check, option


@dataclass(frozen=True)
class Stage:
    """One training stage: which parameters (`plan.STAGE_PARAMS[name]`), how long, how fast."""

    name: str
    steps: int
    lr: float
    l2sp: float = 0.0


# CPU defaults that finish in a few minutes on the built-in prompts (docs/finetune.md has the measurements).
DEFAULT_STAGES = (Stage("fc_norm", steps=60, lr=1e-3), Stage("all", steps=60, lr=1e-4, l2sp=1e-3))
DEFAULT_CONTINUATION_TOKENS = 96
DEFAULT_MAX_LEN = 128  # positions per training sample (the last ones: prompt tail + continuation)
_A, _B = DEFAULT_STAGES


@dataclass(frozen=True)
class FinetuneOptions:
    """The data, the two stages (A: fc_norm and fc; B: every weight but embed_tokens / lm_head) and TTT."""

    prompts: str | None = option(
        None,
        flag="--train-prompts",
        metavar="NAME|FILE|DIR",
        help="Prompts the target continues to make the training data: a suite (builtin, "
        'spec-bench-sample), a JSONL file ({"prompt": ...} or {"messages": [...]} per line, or Spec-Bench / '
        "SPEED-Bench rows) or a prepared Spec-Bench / SPEED-Bench folder; keep them apart from the "
        "prompts you measure on. Default: the built-in set.",
    )
    chat_template: str | None = option(
        None,
        help="Jinja template (file or literal) replacing the target's; 'none' for raw text. "
        "Use the template you serve with.",
    )
    continuation_tokens: int = option(
        DEFAULT_CONTINUATION_TOKENS, min=1, help="Target greedy tokens generated per prompt."
    )
    max_len: int = option(
        DEFAULT_MAX_LEN,
        min=1,
        help="Train on the last N positions of each sequence (the target still reads all of it).",
    )
    whole_sequences: bool = option(False, help="Train on whole sequences (slower on long prompts).")
    eval_every: int = option(
        1, min=1, help="Score the held-out expected acceptance length every N steps; the best step is written."
    )
    steps_fc_norm: int = option(_A.steps, min=0, help="Stage A steps (fc_norm.* and fc train); 0 skips the stage.")
    steps_all: int = option(
        _B.steps, min=0, help="Stage B steps (every weight but embed_tokens / lm_head); 0 skips the stage."
    )
    lr_fc_norm: float = option(_A.lr, help="Stage A peak learning rate.")
    lr_all: float = option(_B.lr, help="Stage B peak learning rate.")
    l2sp: float = option(_B.l2sp, help="Stage B L2-SP weight: pulls the weights toward those the stage starts from.")
    ttt_steps: int = option(3, min=1, help="Training-time-test depth (draft steps unrolled per position).")
    seed: int = option(0, help="Seed for the batch order and the initial state.")
    nproc: int = option(
        1,
        min=1,
        help="Data-parallel training processes (torch.distributed: gloo on the CPU, nccl on GPUs, one GPU "
        "each): each trains on its part of every batch from a capture cache of the training sequences. "
        "Under torchrun the world is torchrun's (docs/scale.md).",
    )

    def __post_init__(self) -> None:
        check(self)

    def stages(self) -> list[Stage]:
        """Stage A then stage B with these steps and rates (`plan_finetune` drops a 0-step stage)."""
        return [
            Stage(_A.name, self.steps_fc_norm, self.lr_fc_norm),
            Stage(_B.name, self.steps_all, self.lr_all, self.l2sp),
        ]

    @property
    def train_len(self) -> int | None:
        """Positions per training sample: `max_len`, None with `whole_sequences`."""
        return None if self.whole_sequences else self.max_len
