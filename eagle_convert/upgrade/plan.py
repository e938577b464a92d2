"""`plan_upgrade`: everything an EAGLE-3 → EAGLE-3.1 upgrade will do, computed without writing.

The plan lists every output tensor with where its bytes come from (a byte range of an input file,
or new bytes for the `fc_norm.{i}.weight` ones: ones, or the values of a `NormInit` such as
`upgrade --init calibrated` computes), the renames, the config before and after, the model card,
the output files with their exact sizes, and where the aux layer ids came from. `--dry-run` renders
it; `upgrade.apply_upgrade` executes it. Refusals raise `UpgradeRefusedError` with one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert import __version__
from eagle_convert.diff import config_diff
from eagle_convert.draft.card import CARD_FILE, PROVENANCE_KEY, model_card
from eagle_convert.draft.checkpoint import SAFETENSORS_INDEX_FNAME, Checkpoint
from eagle_convert.draft.describe import DraftInfo
from eagle_convert.draft.layout import config_get
from eagle_convert.errors import UpgradeRefusedError, UsageError
from eagle_convert.io.outfile import ByteRange, OutTensor
from eagle_convert.upgrade.configgen import (
    TargetInfo,
    apply_rules,
    choose_architectures,
    choose_model_type,
    to_native,
    to_speculators,
)
from eagle_convert.upgrade.norminit import FLOAT_DTYPES, NormInit, norm_bytes
from eagle_convert.upgrade.outfiles import PlannedFile, index_json, norm_name, plan_files
from eagle_convert.vllm_model.config import read_config
from eagle_convert.vllm_model.tables import default_aux_ids

__all__ = ["LAYOUTS", "AuxIds", "UpgradePlan", "plan_upgrade"]

LAYOUTS = ("vllm", "keep", "speculators")
CARD_PLACEHOLDER = "PATH_TO_THIS_DRAFT"  # what the card's `vllm serve` loads when the plan has no output folder


@dataclass(frozen=True)
class AuxIds:
    ids: tuple[int, ...]
    origin: str  # "config" | "option" | "target-default"
    detail: str  # said to the user and recorded in the provenance block


@dataclass
class UpgradePlan:
    checkpoint: Checkpoint = field(repr=False)
    source: str
    source_layout: str
    storage: str
    layout: str
    config_format: str  # "native" | "speculators"
    attention: str
    num_aux: int
    target_hidden_size: int
    norm_dtype: str
    norm_output: bool
    aux: AuxIds
    files: list[PlannedFile]
    renames: dict[str, str]
    additions: list[OutTensor]
    config_before: dict[str, Any]
    config_after: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)
    norm_init: NormInit | None = None  # None: ones
    readme: str = ""  # the model card (README.md)

    @property
    def sharded(self) -> bool:
        return len(self.files) > 1 or self.storage == "sharded"

    @property
    def carried(self) -> list[OutTensor]:
        return [t for f in self.files for t in f.tensors if isinstance(t.source, ByteRange)]

    def config_json(self) -> str:
        return json.dumps(self.config_after, indent=2) + "\n"

    @property
    def output_files(self) -> dict[str, int]:
        """Every file the upgrade writes, with its exact size in bytes."""
        out = {f.filename: f.total_bytes for f in self.files}
        if self.sharded:
            out[SAFETENSORS_INDEX_FNAME] = len(index_json(self.files))
        out["config.json"] = len(self.config_json().encode())
        out[CARD_FILE] = len(self.readme.encode())
        return out

    @property
    def total_bytes(self) -> int:
        return sum(self.output_files.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "source_layout": self.source_layout,
            "storage": self.storage,
            "layout": self.layout,
            "config_format": self.config_format,
            "attention": self.attention,
            "num_aux": self.num_aux,
            "target_hidden_size": self.target_hidden_size,
            "norm_dtype": self.norm_dtype,
            "norm_output": self.norm_output,
            "aux_layer_ids": {"ids": list(self.aux.ids), "origin": self.aux.origin, "detail": self.aux.detail},
            "renames": self.renames,
            "additions": [
                {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), **self._init(i)}
                for i, t in enumerate(self.additions)
            ],
            "config_diff": config_diff(self.config_before, self.config_after).to_dict(),
            "config_after": self.config_after,
            "files": [{"filename": f.filename, "bytes": f.total_bytes, "tensors": len(f.tensors)} for f in self.files],
            "output_files": self.output_files,
            "total_bytes": self.total_bytes,
            "warnings": self.warnings,
            "not_carried": self.not_carried,
        }

    def _init(self, i: int) -> dict[str, Any]:
        if self.norm_init is None:
            return {"init": "ones"}
        v = self.norm_init.values[i]
        return {"init": self.norm_init.method, **({"value": v[0]} if len(v) == 1 else {"mean": sum(v) / len(v)})}


def plan_upgrade(
    ckpt: Checkpoint,
    info: DraftInfo,
    *,
    layout: str = "vllm",
    norm_output: bool = True,
    aux_layer_ids: list[int] | None = None,
    target: TargetInfo | None = None,
    norm_init: NormInit | None = None,
    out: str | Path | None = None,
) -> UpgradePlan:
    """The upgrade of `ckpt` to EAGLE-3.1 in output `layout`; raises on anything it must refuse.

    `norm_init`: the fc_norm values (default ones). `out`: the output folder, which the model
    card's `vllm serve` command loads (a placeholder when None; `push` points it at the hub repo).
    """
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}", hint=f"choose one of {', '.join(LAYOUTS)}")
    fc_name, num_aux, ht = _check_upgradable(ckpt, info)
    fc = ckpt.tensors[fc_name]
    warnings: list[str] = []
    aux = _resolve_aux(ckpt, info, num_aux, aux_layer_ids, target, warnings)

    rename = (lambda n: n) if layout == "keep" else (lambda n: info.canonical[n])
    additions = [
        OutTensor(norm_name(i, fc_name, layout), fc.dtype, (ht,), norm_bytes(norm_init, i, num_aux, ht, fc.dtype))
        for i in range(num_aux)
    ]
    taken = {rename(n) for n in ckpt.tensors}
    for t in additions:
        if t.name in taken:
            raise UpgradeRefusedError(f"{ckpt.description}: output would hold {t.name!r} twice")
    files = plan_files(ckpt, rename, fc_name, additions)
    renames = {n: rename(n) for n in ckpt.tensors if rename(n) != n}

    config_format, after = _plan_config(ckpt, info, layout, target)
    after = apply_rules(
        after,
        config_format,
        layout,
        {"provenance": {}, **_values(after, info, norm_output, aux, num_aux, config_format)},
    )
    changed = config_diff(ckpt.config, {k: v for k, v in after.items() if k != PROVENANCE_KEY}).paths()
    after[PROVENANCE_KEY] = _provenance(ckpt, info, layout, aux, additions, renames, changed, norm_init)
    if after.get("model_type") != config_get(ckpt.config, "model_type") and config_format == "native":
        warnings.append(
            f"model_type {ckpt.config.get('model_type')!r} makes vLLM rewrite the draft into an MTP model "
            f"(SpeculativeConfig.hf_config_override); written as {after.get('model_type')!r}"
        )
    if target is not None:
        if target.hidden_size is not None and target.hidden_size != ht:
            warnings.append(f"target hidden_size {target.hidden_size} != draft target_hidden_size {ht}")
        if target.vocab_size is not None and info.vocab_size is not None and target.vocab_size != info.vocab_size:
            warnings.append(f"target vocab_size {target.vocab_size} != draft vocab_size {info.vocab_size}")
    used = {
        *ckpt.weight_files,
        SAFETENSORS_INDEX_FNAME,
        f"{ckpt.prefix}/{SAFETENSORS_INDEX_FNAME}",
        "config.json",
        f"{ckpt.prefix}/config.json",
    }
    readme = model_card(
        after,
        model_ref=str(out) if out is not None else CARD_PLACEHOLDER,
        target=target.ref if target is not None else None,
    )
    return UpgradePlan(
        checkpoint=ckpt,
        source=ckpt.description,
        source_layout=info.layout,
        storage=ckpt.storage,
        layout=layout,
        config_format=config_format,
        attention=info.attention,
        num_aux=num_aux,
        target_hidden_size=ht,
        norm_dtype=fc.dtype,
        norm_output=norm_output,
        aux=aux,
        files=files,
        renames=renames,
        additions=additions,
        config_before=ckpt.config,
        config_after=after,
        warnings=warnings,
        not_carried=[f for f in ckpt.source.list_files() if f not in used],
        norm_init=norm_init,
        readme=readme,
    )


def _refuse(ckpt: Checkpoint, what: str, hint: str | None = None) -> UpgradeRefusedError:
    return UpgradeRefusedError(f"{ckpt.description}: {what}", hint=hint)


def _check_upgradable(ckpt: Checkpoint, info: DraftInfo) -> tuple[str, int, int]:
    """(on-disk fc name, A, target hidden size), or the one-line reason the upgrade is refused."""
    inv = {c: k for k, c in info.canonical.items()}
    fc_name = inv.get("fc.weight")
    vcfg = read_config(ckpt.config)
    if not vcfg.flags["use_aux"]:
        raise _refuse(
            ckpt,
            "eagle_config.use_aux_hidden_state is false: the draft fuses no aux hidden states, "
            "so there is nothing for fc_norm to normalise",
        )
    if fc_name is None:
        raise _refuse(
            ckpt,
            "no fc.weight tensor, so there is nothing for fc_norm to normalise",
            hint="upgrade needs an EAGLE-3 draft",
        )
    fc, ht = ckpt.tensors[fc_name], info.target_hidden_size
    if len(fc.shape) != 2 or not ht or fc.shape[1] % ht or info.num_aux is None:
        raise _refuse(
            ckpt,
            f"{fc_name} {list(fc.shape)} is not [H, A x target_hidden_size ({ht})]",
            hint="fix target_hidden_size in config.json",
        )
    num_aux = fc.shape[1] // ht
    flags = info.flags
    fc_norms = sorted(k for k, c in info.canonical.items() if c.startswith("fc_norm."))

    def where(flag: str) -> str:
        return ", ".join(flags[flag].where) or "default"

    disagree = None
    if fc_norms and not flags["fc_norm"].value:
        disagree = f"{fc_norms[0]} exists but fc_norm is false ({where('fc_norm')})"
    elif flags["fc_norm"].value and not fc_norms:
        disagree = f"fc_norm is true ({where('fc_norm')}) but there is no fc_norm.0.weight"
    elif "input_norm.weight" in inv and not flags["norm_before_fc"].value:
        disagree = f"{inv['input_norm.weight']} exists but norm_before_fc is false ({where('norm_before_fc')})"
    elif flags["norm_before_fc"].value and "input_norm.weight" not in inv:
        disagree = f"norm_before_fc is true ({where('norm_before_fc')}) but there is no input_norm.weight"
    else:
        for key in ("num_aux_hidden_states", "num_aux_layers"):
            declared = vcfg.vcfg.get(key)
            if isinstance(declared, int) and declared != num_aux:
                disagree = (
                    f"{key} is {declared} but {fc_name} width {fc.shape[1]} / target_hidden_size {ht} gives A={num_aux}"
                )
    if disagree:
        raise _refuse(
            ckpt,
            f"flags and tensors disagree: {disagree}",
            hint="fix config.json or the weights first; see eagle-convert inspect",
        )
    if flags["norm_before_fc"].value:
        raise _refuse(
            ckpt,
            f"is a norm_before_fc draft (input_norm.weight; norm_before_fc set in "
            f"{where('norm_before_fc')}): adding fc_norm would normalise the aux states twice",
            hint="only plain EAGLE-3 drafts upgrade",
        )
    if info.variant == "EAGLE-3.1":
        raise _refuse(ckpt, f"already EAGLE-3.1: {'; '.join(info.variant_reasons)}", hint="nothing to upgrade")
    if fc.dtype not in FLOAT_DTYPES:
        raise _refuse(ckpt, f"{fc_name} is {fc.dtype}; fc_norm weights need a float dtype ({', '.join(FLOAT_DTYPES)})")
    return fc_name, num_aux, ht


def _resolve_aux(
    ckpt: Checkpoint,
    info: DraftInfo,
    num_aux: int,
    option: list[int] | None,
    target: TargetInfo | None,
    warnings: list[str],
) -> AuxIds:
    config_ids = info.aux_layer_ids
    if option is not None:
        ids, origin = list(option), "option"
        detail = "--aux-layer-ids"
        if config_ids and list(config_ids) != ids:
            detail += f" (replacing {config_ids} from {info.aux_layer_ids_where[0]})"
    elif config_ids:
        ids, origin = list(config_ids), "config"
        detail = f"config {info.aux_layer_ids_where[0]}"
        others = {p: config_get(ckpt.config, p) for p in info.aux_layer_ids_where[1:]}
        for path, value in others.items():
            if [int(x) for x in value] != ids:
                warnings.append(
                    f"config {path} is {value} but vLLM reads {info.aux_layer_ids_where[0]} {ids}; "
                    f"writing {ids} everywhere"
                )
    elif target is not None:
        n = target.num_layers
        if num_aux != 3:
            raise UsageError(
                f"{ckpt.description}: config.json has no aux layer ids and vLLM's default (2, N//2, N-3) "
                f"gives 3, but this draft has A={num_aux}",
                hint=f"pass --aux-layer-ids with {num_aux} ids",
            )
        ids, origin = list(default_aux_ids(n)), "target-default"
        detail = f"vLLM's default (2, N//2, N-3) for --target {target.ref} (N={n})"
    else:
        raise UsageError(
            f"{ckpt.description}: config.json has no aux layer ids",
            hint="pass --aux-layer-ids (e.g. 2,16,29) or --target TARGET to use vLLM's default (2, N//2, N-3)",
        )
    err = UpgradeRefusedError if origin == "config" else UsageError
    where = detail if origin != "option" else "--aux-layer-ids"
    if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
        raise err(
            f"{ckpt.description}: aux layer ids {ids} ({where}) collide or are negative; vLLM captures each "
            "target layer once",
            hint="pass distinct non-negative --aux-layer-ids",
        )
    if len(ids) != num_aux:
        if origin == "config":
            raise _refuse(
                ckpt,
                f"flags and tensors disagree: {where} lists {len(ids)} aux layer ids but fc.weight takes A={num_aux}",
                hint="pass --aux-layer-ids with the ids the draft was trained on",
            )
        raise UsageError(
            f"--aux-layer-ids gives {len(ids)} ids but the draft has A={num_aux}", hint=f"pass {num_aux} ids"
        )
    if target is not None and max(ids) > target.num_layers:
        msg = f"aux layer id {max(ids)} ({where}) is beyond the target's {target.num_layers} layers"
        if origin == "option":
            raise UsageError(msg, hint="vLLM id k means the output of k target layers")
        warnings.append(msg)
    return AuxIds(tuple(ids), origin, detail)


def _plan_config(
    ckpt: Checkpoint, info: DraftInfo, layout: str, target: TargetInfo | None
) -> tuple[str, dict[str, Any]]:
    """(output config format, the config the rules are applied to)."""
    speculators_in = info.layout == "speculators"
    if layout == "keep":
        return ("speculators" if speculators_in else "native"), ckpt.config
    if layout == "vllm":
        return "native", to_native(ckpt.config) if speculators_in else ckpt.config
    if speculators_in:
        return "speculators", ckpt.config
    if target is None:
        raise UsageError(
            f"--layout speculators needs --target for {ckpt.description}",
            hint="it is written as speculators_config.verifier.name_or_path",
        )
    return "speculators", to_speculators(ckpt.config, info.attention, target.ref)


def _values(
    config: dict[str, Any], info: DraftInfo, norm_output: bool, aux: AuxIds, num_aux: int, fmt: str
) -> dict[str, Any]:
    return {
        "architectures": choose_architectures(list(config.get("architectures") or []), info.attention)
        if fmt == "native"
        else config.get("architectures"),
        "model_type": choose_model_type(config, info.attention) if fmt == "native" else config.get("model_type"),
        "fc_norm": True,
        "norm_output": norm_output,
        "norm_before_fc": False,
        # The value the draft was trained with = what vLLM applies to the input today (defaults differ per path).
        "norm_before_residual": info.flags["norm_before_residual"].value,
        "aux_layer_ids": list(aux.ids),
        "num_aux": num_aux,
    }


def _provenance(
    ckpt: Checkpoint,
    info: DraftInfo,
    layout: str,
    aux: AuxIds,
    additions: list[OutTensor],
    renames: dict[str, str],
    config_changes: list[str],
    norm_init: NormInit | None,
) -> dict[str, Any]:
    commit = getattr(ckpt.source, "commit", None)
    prov: dict[str, Any] = {
        "tool": "eagle-convert",
        "version": __version__,
        "operation": "upgrade EAGLE-3 -> EAGLE-3.1",
        "source": ckpt.description,
    }
    if commit:
        prov["source_revision"] = commit
    prov.update(
        {
            "source_layout": info.layout,
            "source_storage": ckpt.storage,
            "output_layout": layout,
            "added_tensors": [t.name for t in additions],
            "added_init": norm_init.method if norm_init else "ones",
            "renamed_tensors": len(renames),
            "aux_layer_ids_from": aux.detail,
            "config_changes": config_changes,
        }
    )
    if norm_init is not None:
        prov["fc_norm_init"] = norm_init.record
    return prov
