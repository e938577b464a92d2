"""The fine-tune's output: its provenance entry, the model card, and the atomic write that must read back."""

from __future__ import annotations

from typing import Any

from eagle_convert._version import __version__
from eagle_convert.draft import CARD_FILE, PROVENANCE_KEY, model_card
from eagle_convert.errors import EagleConvertError
from eagle_convert.finetune.plan import FROZEN, LOSS_DECAY, FinetunePlan, FinetuneResult


def provenance(plan: FinetunePlan, result: FinetuneResult) -> dict[str, Any]:
    """The `_eagle_convert` entry: what was trained, how, on what; the input's entry nests as `previous`."""
    prov: dict[str, Any] = {
        "tool": "eagle-convert",
        "version": __version__,
        "operation": "finetune (TTT)",
        "source": str(plan.draft),
        "source_variant": plan.variant,
        "target": str(plan.target),
        "stages": [
            {"name": s.name, "trainable": s.trainable, "steps": s.steps, "lr": s.lr, "l2sp": s.l2sp}
            for s in result.stages
        ],
        "frozen": list(FROZEN),
        "ttt_steps": plan.ttt_steps,
        "loss_decay": LOSS_DECAY,
        "batch_size": plan.batch_size,
        "seed": plan.seed,
        "data": {
            "prompts": plan.prompts_label,
            "count": len(plan.prompts),
            "sequences": result.sequences,
            "tokens": result.tokens,
            "chat_template": plan.template_label,
            "continuation": f"target greedy, {plan.continuation_tokens} tokens",
        },
        "step_acc_before": [round(a, 4) for a in result.step_acc_before],
        "step_acc_after": [round(a, 4) for a in result.step_acc_after],
        "max_len": plan.max_len,
        "selection": {
            "metric": "held-out expected acceptance length, sum_k prod_{i<=k} acc_i (speculators PR 741)",
            "held_out_sequences": result.held_out,
            "eal_before": None if result.eal_before is None else round(result.eal_before, 4),
            "kept": result.best,
        },
    }
    if PROVENANCE_KEY in plan.config:
        prov["previous"] = plan.config[PROVENANCE_KEY]
    return prov


def write_finetuned(plan: FinetunePlan, drafter: Any, prov: dict[str, Any]) -> None:
    """vLLM layout via `write_draft`, inside an atomic output dir; the written draft must reload."""
    import torch

    from eagle_convert.errors import OutputError
    from eagle_convert.io import OutputExistsError, atomic_output_dir, torch_dtype
    from eagle_convert.reference import load_drafter, write_draft
    from eagle_convert.validate import serving_summary

    dtype = torch_dtype(plan.dtype)  # F32, BF16 or F16 (plan.py)
    config = {**plan.config, PROVENANCE_KEY: prov}
    try:
        with atomic_output_dir(plan.out, force=plan.force) as tmp:
            write_draft(drafter, config, tmp, include_embed=plan.include_embed, dtype=dtype)
            card = model_card(
                config,
                model_ref=str(plan.out),
                target=str(plan.target),
                dtype=plan.dtype,
                serving=serving_summary(tmp),  # the matrix of the draft just written
            )
            (tmp / CARD_FILE).write_text(card, encoding="utf-8")
            back = load_drafter(
                tmp,
                plan.release,
                target_embed=drafter.embed_tokens.weight,
                target_lm_head=drafter.lm_head.weight,
                device=drafter.embed_tokens.weight.device,
            ).state_dict()
            for name, t in drafter.state_dict().items():
                want = t.to(dtype).to(back[name].dtype) if t.is_floating_point() else t
                if not torch.equal(back[name], want):
                    raise EagleConvertError(f"{plan.out}: written tensor {name} does not read back")
    except OutputExistsError as exc:
        raise OutputError(
            f"{plan.out}: output already exists", hint="pass {force} to replace it", options=("force",), file=plan.out
        ) from exc
    except EagleConvertError:
        raise
    except OSError as exc:
        raise OutputError(
            f"{exc.filename or plan.out}: cannot write the output ({exc.strerror or exc})",
            hint="check free space and permissions",
        ) from exc
