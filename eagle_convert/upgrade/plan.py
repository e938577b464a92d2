"""`plan_upgrade`: everything an EAGLE-3 → EAGLE-3.1 upgrade will do, computed without writing.

The plan lists every output tensor with where its bytes come from (a byte range of an input file,
or new bytes for the `fc_norm.{i}.weight` ones: ones, or the values of a `NormInit` such as
`upgrade --init calibrated` computes), the renames, the config before and after, the model card,
the output files with their exact sizes, and where the aux layer ids came from. `--dry-run` renders
it; `upgrade.apply_upgrade` executes it. Refusals raise `UpgradeRefusedError` with one line.

Here: the plan (`UpgradePlan`) and its assembly. Its parts live beside it: what is refused
(`refusals`), where the aux layer ids come from (`auxids`), the output files (`outfiles`), the
config rules (`configgen`) and the fc_norm values (`norminit`).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert._version import __version__
from eagle_convert.diff import config_diff
from eagle_convert.draft import (
    CARD_FILE,
    PROVENANCE_KEY,
    Checkpoint,
    DraftInfo,
    Target,
    model_card,
    recorded_target,
    weights_dtype,
)
from eagle_convert.errors import EagleConvertError, UpgradeRefusedError, UsageError
from eagle_convert.io import INDEX_FILENAME, ByteRange, OutTensor
from eagle_convert.jsonable import dump, key
from eagle_convert.upgrade.auxids import AuxIds, resolve_aux
from eagle_convert.upgrade.configgen import (
    apply_rules,
    choose_architectures,
    choose_model_type,
    complete_verifier,
    speculators_verifier,
    to_native,
    to_speculators,
    verifier_block,
)
from eagle_convert.upgrade.norminit import NormInit, norm_bytes
from eagle_convert.upgrade.outcheck import OutputCheck, output_key, static_errors
from eagle_convert.upgrade.outfiles import PlannedFile, index_json, norm_name, plan_files, planned_output
from eagle_convert.upgrade.portable import engines_for, make_portable
from eagle_convert.upgrade.refusals import check_upgradable
from eagle_convert.vllm_model import Release, mtp_rewrite

LAYOUTS = ("vllm", "keep", "speculators")
CARD_PLACEHOLDER = "PATH_TO_THIS_DRAFT"  # what the card's `vllm serve` loads when the plan has no output folder


@dataclass
class UpgradePlan:
    """An EAGLE-3.1 upgrade, fully planned and not yet written: renames, added norms, config, output files."""

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
    release: Release = field(repr=False)  # the vLLM release the input was described for
    warnings: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)
    norm_init: NormInit | None = None  # None: ones
    readme: str = ""  # the model card (README.md)
    # `--for`: the engine releases the config is written for (empty: vLLM)
    engines: tuple[str, ...] = field(default=(), metadata=key("for"))
    output_check: OutputCheck | None = field(default=None, repr=False)  # validate's errors on the planned output

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
            out[INDEX_FILENAME] = len(index_json(self.files))
        out["config.json"] = len(self.config_json().encode())
        out[CARD_FILE] = len(self.readme.encode())
        return out

    @property
    def total_bytes(self) -> int:
        return sum(self.output_files.values())

    def to_dict(self) -> dict[str, Any]:
        additions = [
            {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), **self._init(i)}
            for i, t in enumerate(self.additions)
        ]
        return dump(
            self,
            _KEYS,
            aux_layer_ids=dump(self.aux, "ids origin detail"),
            additions=additions,
            config_diff=config_diff(self.config_before, self.config_after),
            files=[{"filename": f.filename, "bytes": f.total_bytes, "tensors": len(f.tensors)} for f in self.files],
        )

    def _init(self, i: int) -> dict[str, Any]:
        if self.norm_init is None:
            return {"init": "ones"}
        v = self.norm_init.values[i]
        return {"init": self.norm_init.method, **({"value": v[0]} if len(v) == 1 else {"mean": sum(v) / len(v)})}


_KEYS = (
    "source source_layout storage layout config_format attention num_aux target_hidden_size norm_dtype norm_output "
    "aux_layer_ids renames additions config_diff config_after files output_files total_bytes warnings not_carried for"
)


def plan_upgrade(
    ckpt: Checkpoint,
    info: DraftInfo,
    *,
    layout: str = "vllm",
    norm_output: bool = True,
    aux_layer_ids: list[int] | None = None,
    target: Target | None = None,
    norm_init: NormInit | None = None,
    out: str | Path | None = None,
    engines: Sequence[str] = (),
) -> UpgradePlan:
    """The upgrade of `ckpt` to EAGLE-3.1 in output `layout`; raises on anything it must refuse.

    Pure: nothing is written (`apply_upgrade` executes the plan).

    Args:
        ckpt: the opened EAGLE-3 draft (`open_checkpoint`).
        info: its description (`describe(ckpt)`).
        layout: the output's tensor names: "vllm" (vLLM-native), "keep" or "speculators".
        norm_output: also set `norm_output` (False: only the fc_norm weights).
        aux_layer_ids: aux ids in vLLM's convention for a config that has none (replaces the
            config's when it has some).
        target: the target model, for vLLM's default aux ids and a speculators verifier.
        norm_init: the fc_norm values (default ones; `Calibration.norm_init()` for measured ones).
        out: the output folder, which the model card's `vllm serve` command loads (a placeholder
            when None; `push` points it at the hub repo).
        engines: `--for` specs ("vllm", "sglang", "trtllm==main@00679c6", "all"): the config is
            written so every named engine reads it as trained (`upgrade.portable`); empty: vLLM.

    Returns:
        The plan: renames, added tensors, the new config, output files and bytes.

    Raises:
        UpgradeRefusedError: an input the upgrade must refuse (already EAGLE-3.1, `norm_before_fc`,
            flags and tensors that disagree, colliding aux ids, ...).
        UsageError: an unknown layout, missing aux ids, or a layout that needs `target`.
    """
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}", hint=f"choose one of {', '.join(LAYOUTS)}")
    fc_name, num_aux, ht = check_upgradable(ckpt, info)
    fc = ckpt.tensors[fc_name]
    warnings: list[str] = []
    aux = resolve_aux(ckpt, info, num_aux, aux_layer_ids, target, warnings)

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

    serving = engines_for(engines)  # an unknown engine: a usage error before anything is planned
    config_format, base = _plan_config(ckpt, info, layout, target, warnings)
    after = apply_rules(
        base,
        config_format,
        layout,
        {"provenance": {}, **_values(base, info, norm_output, aux, num_aux, config_format)},
    )
    after = make_portable(
        after,
        serving,
        ckpt=ckpt,
        attention=info.attention,
        aux_ids=aux.ids,
        num_aux=num_aux,
        tensors=frozenset({*(rename(n) for n in ckpt.tensors), *(t.name for t in additions)}),
        config_format=config_format,
        target=target,
        warnings=warnings,
        release=info.view.release,
        d2t=ckpt.tensors.get(info.disk_name("d2t") or ""),
    )
    changed = config_diff(ckpt.config, {k: v for k, v in after.items() if k != PROVENANCE_KEY}).paths()
    after[PROVENANCE_KEY] = _provenance(ckpt, info, layout, aux, additions, renames, changed, norm_init)
    # Only a model_type the input sets (its own, or its speculators transformer_layer_config's) and
    # vLLM would rewrite is worth a warning; an absent one is not (the "llama" to_native writes).
    if config_format == "native" and mtp_rewrite({"model_type": base.get("model_type")}, info.view.release) is not None:
        warnings.append(
            f"model_type {base.get('model_type')!r} makes vLLM rewrite the draft into an MTP model "
            f"(SpeculativeConfig.hf_config_override); written as {after.get('model_type')!r}"
        )
    if target is not None:
        if target.hidden_size is not None and target.hidden_size != ht:
            warnings.append(f"target hidden_size {target.hidden_size} != draft target_hidden_size {ht}")
        if target.vocab_size is not None and info.vocab_size is not None and target.vocab_size != info.vocab_size:
            warnings.append(f"target vocab_size {target.vocab_size} != draft vocab_size {info.vocab_size}")
    used = {
        *ckpt.weight_files,
        INDEX_FILENAME,
        f"{ckpt.prefix}/{INDEX_FILENAME}",
        "config.json",
        f"{ckpt.prefix}/config.json",
    }
    serving_line, check = _serving(ckpt, files, after, info.view.release)
    readme = model_card(
        after,
        model_ref=str(out) if out is not None else CARD_PLACEHOLDER,
        # a native output keeps no speculators verifier: the card names the input's
        target=target.ref if target is not None else recorded_target(ckpt.config),
        dtype=weights_dtype(t for f in files for t in f.tensors),
        serving=serving_line,
        engines=[st.engine for st in serving],
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
        release=info.view.release,
        warnings=warnings,
        not_carried=[f for f in ckpt.source.list_files() if f not in used],
        norm_init=norm_init,
        readme=readme,
        engines=tuple(dict.fromkeys(st.label for st in serving)),
        output_check=check,
    )


def _serving(
    ckpt: Checkpoint, files: list[PlannedFile], config: dict[str, Any], release: Release
) -> tuple[str | None, OutputCheck | None]:
    """The card's compatibility-matrix sentence for the output as planned (None: the planned output
    cannot be read as a draft, or has static errors: the preflight refuses it, so no card is written),
    and the static check it made (kept on the plan for the preflight: `outcheck.py`).

    The matrix validates the output once per known release; an output the preflight will refuse is
    checked once, not 16 times (a crafted header of 200,000 tensors took 107 s here)."""
    from eagle_convert.validate import serving_summary

    sharded = len(files) > 1 or ckpt.storage == "sharded"
    try:
        out = planned_output(ckpt, files, config, sharded=sharded)
        memo: dict[Hashable, Any] = {}  # the matrix reuses the check's reading of the vocabulary maps
        check = static_errors(out, output_key(files, config), release, memo)
        return (None if check.errors else serving_summary(out, shared=memo)), check
    except EagleConvertError:
        return None, None


def _plan_config(
    ckpt: Checkpoint, info: DraftInfo, layout: str, target: Target | None, warnings: list[str]
) -> tuple[str, dict[str, Any]]:
    """(output config format, the config the rules are applied to); appends what the user must know."""
    speculators_in = info.layout == "speculators"
    if layout == "keep":
        if speculators_in:
            return "speculators", complete_verifier(ckpt.config, target, warnings)
        return "native", ckpt.config
    if layout == "vllm":
        return "native", to_native(ckpt.config, info.view.release) if speculators_in else ckpt.config
    if speculators_in:
        return "speculators", complete_verifier(ckpt.config, target, warnings)
    if target is None:
        raise UsageError(
            f"{{layout=speculators}} needs {{target}} for {ckpt.description}",
            hint="it is written as speculators_config.verifier.name_or_path",
            options=("layout", "target"),
        )
    verifier, warning = speculators_verifier(target)
    block, arch_warning = verifier_block(verifier, target)
    warnings.extend(w for w in (warning, arch_warning) if w)
    return "speculators", to_speculators(ckpt.config, info.attention, block)


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
        # eagle_config keeps a producer's own ids (SGLang reads them there in that convention)
        "nested_aux_ids": list(aux.written or aux.ids),
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
