"""`plan_link`: an upgrade whose output links the input's weight files instead of copying them.

The output folder holds the input's safetensors files unchanged (reflinked or hard-linked by
`upgrade.link.apply_link`; copied where neither is possible), one small new shard with the
`fc_norm.{i}.weight` ones, a new `model.safetensors.index.json` mapping every tensor (the new
shard's included) and the new config. Time and disk use are then flat in the checkpoint size.

That only works where vLLM loads the input's tensor names as they are, since a linked file's
header cannot change. vLLM renames `midlayer.` to `layers.0.` itself (vLLM 0.32.0
`model_executor/models/llama_eagle3.py`, `LlamaModel.hf_to_vllm_mapper`; the same in
`qwen3_eagle3.py` and `deepseek_eagle3.py`), so SpecForge-style names link with `--layout keep`;
NeMo's `model.` prefix (vLLM would read `model.model.*`), names the chosen layout renames, and
`.bin` weights (converted to safetensors) are refused with the reason. Pure: reads only what
`plan_upgrade` read (headers, sizes), writes nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from eagle_convert.draft import CARD_FILE, PROVENANCE_KEY, canonical_name
from eagle_convert.errors import UpgradeRefusedError
from eagle_convert.io import DTYPE_BYTES, FORMAT_PT_METADATA, INDEX_FILENAME, OutFile, file_header, index_text
from eagle_convert.jsonable import dump
from eagle_convert.upgrade.outfiles import PlannedFile
from eagle_convert.upgrade.plan import UpgradePlan
from eagle_convert.vllm_model import vllm_name

NORM_SHARD = "fc_norm.safetensors"
NO_LINK = "drop {link} to write a converted copy"


@dataclass(frozen=True)
class LinkedFile:
    """An input weight file that appears unchanged in the output under `filename`."""

    filename: str
    source: str  # the file's name inside the input checkpoint
    bytes: int
    tensors: int


@dataclass
class LinkPlan:
    """What `upgrade --link` writes: linked files, one new shard, the index and the config."""

    plan: UpgradePlan
    linked: list[LinkedFile]
    shard: PlannedFile
    index_json: str
    config_after: dict[str, Any]

    def config_json(self) -> str:
        """The plan's config.json text, of this config (it also names the linked files)."""
        return replace(self.plan, config_after=self.config_after).config_json()

    @property
    def output_files(self) -> dict[str, int]:
        """Every file of the output with its exact size (linked files at the input's size)."""
        out = {f.filename: f.bytes for f in self.linked}
        out[self.shard.filename] = self.shard.total_bytes
        out[INDEX_FILENAME] = len(self.index_json.encode())
        out["config.json"] = len(self.config_json().encode())
        out[CARD_FILE] = len(self.plan.readme.encode())
        return out

    @property
    def linked_bytes(self) -> int:
        return sum(f.bytes for f in self.linked)

    @property
    def new_bytes(self) -> int:
        """Bytes actually written when every link works."""
        return sum(self.output_files.values()) - self.linked_bytes

    def to_dict(self) -> dict[str, Any]:
        sh = self.shard
        return dump(
            self,
            "methods linked new_shard output_files linked_bytes new_bytes config_after",
            methods=["reflink", "hardlink", "copy"],
            new_shard={"filename": sh.filename, "bytes": sh.total_bytes, "tensors": [t.name for t in sh.tensors]},
        )


def plan_link(plan: UpgradePlan) -> LinkPlan:
    """The linked variant of `plan`, or `UpgradeRefusedError` saying why its files cannot be linked."""
    ckpt = plan.checkpoint
    _check_linkable(plan)
    # plan.files lists one output file per input weight file, in ckpt.weight_files order.
    names = [f.filename for f in plan.files]
    taken = set(names) | {INDEX_FILENAME, "config.json"}
    shard_name = NORM_SHARD
    while shard_name in taken:
        shard_name = "eagle31-" + shard_name
    counts = {src: 0 for src in ckpt.weight_files}
    for t in ckpt.tensors.values():
        counts[t.file] += 1
    linked = [
        LinkedFile(name, src, ckpt.source.file_size(src), counts[src]) for name, src in zip(names, ckpt.weight_files)
    ]
    tensors = sorted(plan.additions, key=lambda t: -DTYPE_BYTES[t.dtype])
    meta = dict(FORMAT_PT_METADATA)
    shard = PlannedFile(shard_name, tensors, meta, len(file_header(OutFile(shard_name, tensors, meta))))
    where = {
        name: out for out, src in zip(names, ckpt.weight_files) for name, t in ckpt.tensors.items() if t.file == src
    }
    where |= {t.name: shard_name for t in tensors}
    total = sum(t.nbytes for t in ckpt.tensors.values()) + shard.data_bytes
    index = index_text(where, total)
    config = copy.deepcopy(plan.config_after)
    prov = config.get(PROVENANCE_KEY)
    if isinstance(prov, dict):
        prov["weight_files"] = {"linked": names, "new": shard_name}
    return LinkPlan(plan, linked, shard, index, config)


def _check_linkable(plan: UpgradePlan) -> None:
    ckpt = plan.checkpoint

    def refuse(why: str, hint: str = NO_LINK) -> UpgradeRefusedError:
        return UpgradeRefusedError(f"{ckpt.description}: cannot {{link}}: {why}", hint=hint, options=("link", "layout"))

    if ckpt.storage == "bin":
        raise refuse(
            f"{ckpt.weight_files[0]} is a PyTorch pickle; upgrade converts it to safetensors, "
            "so there is no file to link"
        )
    # What vLLM's load_weights makes of each on-disk name must be the parameter it belongs to.
    for name in sorted(ckpt.tensors):
        loads_as, wanted = vllm_name(name), canonical_name(name)
        if loads_as is not None and loads_as != wanted:
            raise refuse(
                f"vLLM loads {name!r} as {'model.' + loads_as!r}, not as {wanted!r} (it adds 'model.' "
                "itself), and a linked file keeps its tensor names"
            )
    if plan.renames:
        first, to = next(iter(plan.renames.items()))
        if all(a.replace("midlayer.", "layers.0.", 1) == b for a, b in plan.renames.items()):
            raise refuse(
                f"{{layout={plan.layout}}} renames {len(plan.renames)} tensors (e.g. {first!r} -> {to!r}), "
                "and a linked file keeps its tensor names",
                hint="use {layout=keep} {link}: vLLM renames midlayer. to layers.0. itself",
            )
        raise refuse(
            f"{{layout={plan.layout}}} renames {len(plan.renames)} tensors (e.g. {first!r} -> {to!r}), "
            "and a linked file keeps its tensor names"
        )
    if len(plan.files) != len(ckpt.weight_files):
        raise refuse(f"the plan writes {len(plan.files)} files for {len(ckpt.weight_files)} input files")
