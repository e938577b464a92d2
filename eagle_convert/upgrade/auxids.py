"""Which target layers feed the draft (`aux_layer_ids`), and where that answer came from.

In order: `--aux-layer-ids`, the config (warning where its copies disagree with the one vLLM
reads), vLLM's default (2, N//2, N-3) for `--target`. Bad ids in the config refuse the upgrade;
bad ids the user passed are usage errors. Ids a known producer wrote in its own convention
(SpecForge's eagle_config ids are layer outputs: engines/producers.py) become vLLM's; where the
producer's capture paths disagree for them, the upgrade is refused rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_convert.draft import Checkpoint, DraftInfo, Target
from eagle_convert.engines import CAVEATS, convert, fmt_taps, producer_for
from eagle_convert.errors import UpgradeRefusedError, UsageError
from eagle_convert.upgrade.refusals import refuse
from eagle_convert.vllm_model import default_aux_ids, lookup


@dataclass(frozen=True)
class AuxIds:
    ids: tuple[int, ...]
    origin: str  # "config" | "option" | "target-default"
    detail: str  # said to the user and recorded in the provenance block
    written: tuple[int, ...] | None = None  # the producer's own ids, where converted (kept where SGLang reads)


def resolve_aux(
    ckpt: Checkpoint,
    info: DraftInfo,
    num_aux: int,
    option: list[int] | None,
    target: Target | None,
    warnings: list[str],
) -> AuxIds:
    config_ids = info.aux_layer_ids
    if option is not None:
        ids, origin = list(option), "option"
        detail = "--aux-layer-ids"  # the plan's text (rendered as is), not an error's
        if config_ids and list(config_ids) != ids:
            detail += f" (replacing {config_ids} from {info.aux_layer_ids_where[0]})"
    elif config_ids:
        ids, origin = list(config_ids), "config"
        detail = f"config {info.aux_layer_ids_where[0]}"
        written = _from_producer(ckpt, info, ids, target, warnings)
        if written is not None:
            ids, detail = written
        others = {p: lookup(ckpt.config, p) for p in info.aux_layer_ids_where[1:]}
        for path, value in others.items():
            if [int(x) for x in value] != list(config_ids):
                warnings.append(
                    f"config {path} is {value} but vLLM reads {info.aux_layer_ids_where[0]} {config_ids}; "
                    f"writing {ids} everywhere"
                )
    elif target is not None and (n := target.num_layers) is not None:
        if num_aux != 3:
            raise UsageError(
                f"{ckpt.description}: config.json has no aux layer ids and vLLM's default (2, N//2, N-3) "
                f"gives 3, but this draft has A={num_aux}",
                hint=f"pass {{aux_layer_ids}} with {num_aux} ids",
                options=("aux_layer_ids",),
            )
        ids, origin = list(default_aux_ids(n)), "target-default"
        detail = f"vLLM's default (2, N//2, N-3) for --target {target.ref} (N={n})"
    else:
        raise UsageError(
            f"{ckpt.description}: config.json has no aux layer ids",
            hint="pass {aux_layer_ids} (e.g. 2,16,29) or {target=TARGET} to use vLLM's default (2, N//2, N-3)",
            options=("aux_layer_ids", "target"),
        )
    err = UpgradeRefusedError if origin == "config" else UsageError
    where = detail if origin != "option" else "{aux_layer_ids}"
    named = ("aux_layer_ids",)  # the options the messages below may name
    if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
        raise err(
            f"{ckpt.description}: aux layer ids {ids} ({where}) collide or are negative; vLLM captures each "
            "target layer once",
            hint="pass distinct non-negative {aux_layer_ids}",
            options=named,
        )
    if len(ids) != num_aux:
        if origin == "config":
            raise refuse(
                ckpt,
                f"flags and tensors disagree: {where} lists {len(ids)} aux layer ids but fc.weight takes A={num_aux}",
                hint="pass {aux_layer_ids} with the ids the draft was trained on",
                options=named,
            )
        raise UsageError(
            f"{{aux_layer_ids}} gives {len(ids)} ids but the draft has A={num_aux}",
            hint=f"pass {num_aux} ids",
            options=named,
        )
    if target is not None and target.num_layers is not None and max(ids) > target.num_layers:
        msg = f"aux layer id {max(ids)} ({where}) is beyond the target's {target.num_layers} layers"
        if origin == "option":
            raise UsageError(msg, hint="vLLM id k means the output of k target layers", options=named)
        warnings.append(msg)
    converted = origin == "config" and list(config_ids or []) != ids
    return AuxIds(tuple(ids), origin, detail, tuple(config_ids or []) if converted else None)


def _from_producer(
    ckpt: Checkpoint, info: DraftInfo, ids: list[int], target: Target | None, warnings: list[str]
) -> tuple[list[int], str] | None:
    """(vLLM's ids, the detail) for ids their producer wrote in another convention; None: already vLLM's."""
    producer = producer_for(info.layout)
    where = info.aux_layer_ids_where[0]
    if producer is None or producer.writes != where:
        return None
    target_class = target.architectures[0] if target is not None and target.architectures else None
    conv = convert(ids, producer, target_class=target_class, n=target.num_layers if target else None)
    if conv.ids is None or conv.trained is None:
        raise refuse(
            ckpt,
            f"config {where} {ids}: {conv.why}",
            hint="pass {aux_layer_ids} with the layers it was trained on (vLLM's convention: k = after k target layers)",
            options=("aux_layer_ids",),
        )
    if conv.ids == ids:
        return None
    if conv.assumed:
        warnings.append(f"config {where} {ids} read as {producer.name} trained them for {conv.assumed}")
    if producer.layout in CAVEATS:
        warnings.append(f"{CAVEATS[producer.layout]}: if so, pass --aux-layer-ids {','.join(map(str, ids))}")
    return conv.ids, f"config {where} {ids}, {producer.name}'s convention (trained on {fmt_taps(conv.trained)})"
