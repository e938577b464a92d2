"""What a draft step and a target step cost on the reference engine, timed on the models and the
device of the run whose counters the k sweep reads (`measure/ksweep.py`).

Three steps, each as the decoding loop (`reference/loop.py`) runs it, with the KV caches filled
by one prompt and cut back after every timed call so each repeat sees the same context:

- a target decode step: one token through the target, aux states captured (the baseline's step);
- a target verification at K: K + 1 tokens at once; what it costs over the decode step, per
  token, is `verify_extra_s`;
- a draft step: one token through the drafter on its fed-back state, with its logits.

Each is the median of `repeats` calls after two warm-up calls. On a GPU the calls are
synchronised before the clock is read.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from eagle_convert.measure.ksweep import StepCosts

if TYPE_CHECKING:
    from eagle_convert.reference import EagleDrafter, TargetModel

WARMUP = 2


def _median_s(fn: Callable[[], object], repeats: int, sync: Callable[[], None]) -> float:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_reference_steps(
    target: TargetModel,
    drafter: EagleDrafter,
    prompt_ids: Sequence[int],
    *,
    k: int,
    aux_ids: Sequence[int],
    repeats: int = 20,
) -> StepCosts:
    """Time a target decode step, a target verification of k + 1 tokens and a draft step.

    Args:
        target: the run's target.
        drafter: the run's drafter (on the target's device).
        prompt_ids: a prompt of the run: the context every timed step continues.
        k: the run's k (the verification's length is k + 1).
        aux_ids: the target layers the drafter reads.
        repeats: timed calls per step (the median is kept).

    Returns:
        The step costs (source "reference engine: timed steps").

    Raises:
        ValueError: k or repeats below 1, or an empty prompt.
    """
    import torch

    if k < 1 or repeats < 1 or not prompt_ids:
        raise ValueError("time_reference_steps needs k >= 1, repeats >= 1 and a prompt")
    dev = target.device
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    ids = list(prompt_ids)
    n = len(ids)
    dtype = drafter.fc.weight.dtype if hasattr(drafter, "fc") else drafter.norm.weight.dtype
    with torch.no_grad():
        tcache = target.new_cache()
        pre = target.forward(torch.tensor([ids], device=dev), cache=tcache, aux_ids=aux_ids)
        tok = int(pre.logits[0, -1].argmax())
        one = torch.tensor([[tok]], device=dev)
        many = torch.tensor([[tok] * (k + 1)], device=dev)

        def target_step(x: torch.Tensor) -> Callable[[], object]:
            def run() -> object:
                out = target.forward(x, cache=tcache, aux_ids=aux_ids)
                target.truncate_cache(tcache, n)
                return out.logits[0].argmax(-1)

            return run

        target_s = _median_s(target_step(one), repeats, sync)
        verify_s = _median_s(target_step(many), repeats, sync)

        dcache = drafter.new_cache()
        hidden = drafter.combine_hidden_states(pre.aux.to(dtype))
        pos = torch.arange(0, n, device=dev)[None]
        _, fed = drafter(torch.tensor([ids[1:] + [tok]], device=dev), pos, hidden, dcache.slots)
        fed, p = fed[:, -1:], torch.tensor([[n]], device=dev)

        def draft_step() -> object:
            normed, _ = drafter(one, p, fed, dcache.slots)
            dcache.truncate(n)
            return drafter.compute_logits(normed)[0, -1].argmax()

        draft_s = _median_s(draft_step, repeats, sync)
    return StepCosts(draft_s, target_s, max(0.0, (verify_s - target_s) / k), "reference engine: timed steps")
