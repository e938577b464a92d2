"""A capture cache read back as the trainer's target: the features a frozen target would give.

`reference/batches.py` asks its target for ``(aux, logits on the draft vocabulary, target argmax in
the draft vocabulary)`` of a right-padded batch; ``CachedTarget.features`` answers from the cache,
so training runs without the target in memory and computes exactly what it would online.
Sequences are found by their token ids; tensors are read per shard with ``safe_open`` on demand.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from eagle_convert.cache.store import Manifest, read_manifest
from eagle_convert.errors import UsageError


class CachedTarget:
    """The features of every cached sequence, addressed by token ids."""

    def __init__(self, folder: str | Path, *, device: str | torch.device = "cpu") -> None:
        self.folder = Path(folder)
        self.manifest: Manifest = read_manifest(self.folder)
        if not self.manifest.complete():
            missing = len(list(self.manifest.plan.shards())) - len(self.manifest.shards)
            raise UsageError(f"{self.folder}: capture incomplete ({missing} shards missing); run capture again")
        self.device = torch.device(device)
        self.aux_ids = list(self.manifest.plan.aux_ids)
        self._where: dict[tuple[int, ...], tuple[str, str]] = {}
        for entry in self.manifest.shards.values():
            from safetensors import safe_open

            with safe_open(str(self.folder / entry.file), framework="pt") as h:
                for i in entry.sequences:
                    ids = h.get_tensor(f"s{i}.ids").tolist()
                    self._where[tuple(ids)] = (entry.file, f"s{i}")
        self.vocab_size = self._vocab_size()

    def _vocab_size(self) -> int:
        from eagle_convert.draft import load_target

        n = load_target(self.manifest.plan.target).vocab_size
        if n is None:
            raise UsageError(f"{self.manifest.plan.target}: the target's config.json has no vocab_size")
        return int(n)

    @property
    def target(self) -> Path:
        """The target folder the cache was captured from (the manifest's plan)."""
        return Path(self.manifest.plan.target)

    def sequences(self) -> list[list[int]]:
        """Every cached sequence's token ids, in capture order."""
        order = sorted(self._where.items(), key=lambda kv: int(kv[1][1][1:]))
        return [list(k) for k, _ in order]

    def load(self, ids: Sequence[int]) -> dict[str, Tensor]:
        """``ids``' cached tensors (aux, logits, argmax).

        Raises:
            UsageError: the sequence is not in the cache.
        """
        from safetensors import safe_open

        where = self._where.get(tuple(int(t) for t in ids))
        if where is None:
            raise UsageError(f"{self.folder}: a {len(ids)}-token sequence is not in the cache; capture it first")
        file, key = where
        with safe_open(str(self.folder / file), framework="pt") as h:
            return {n: h.get_tensor(f"{key}.{n}") for n in ("aux", "logits", "argmax")}

    def features(
        self, ids: Tensor, lens: Tensor, aux_ids: Sequence[int], rows: Tensor, t2d: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(aux [B,T,A*H] fp32, target logits on the draft vocab [B,T,Vd], argmax in the draft vocab
        [B,T]) for a right-padded batch, as `reference/batches.py` computes them from a live target.

        Raises:
            UsageError: other aux ids or another draft vocabulary than the cache's.
        """
        if sorted(set(aux_ids)) != self.aux_ids:
            raise UsageError(f"{self.folder}: captured at aux ids {self.aux_ids}, the draft reads {list(aux_ids)}")
        b, t = ids.shape
        aux, tl, iv = [], [], []
        whole = rows.numel() == self.vocab_size and bool((rows.cpu() == torch.arange(self.vocab_size)).all())
        captured_rows = json.dumps(None if whole else [int(r) for r in rows.tolist()])
        if hashlib.sha256(captured_rows.encode()).hexdigest() != self.manifest.plan.rows_sha256:
            raise UsageError(f"{self.folder}: captured for another draft vocabulary; capture for this draft")
        for r in range(b):
            n = int(lens[r])
            got = self.load(ids[r, :n].tolist())
            aux.append(_pad(got["aux"].float(), t))
            tl.append(_pad(got["logits"].float(), t))
            iv.append(_pad(t2d.cpu()[got["argmax"]], t))
        dev = ids.device
        return torch.stack(aux).to(dev), torch.stack(tl).to(dev), torch.stack(iv).to(dev)


def _pad(x: Tensor, t: int) -> Tensor:
    out = x.new_zeros((t, *x.shape[1:]))
    out[: x.shape[0]] = x
    return out


def target_head_weights(target: str | Path) -> tuple[Tensor, Tensor]:
    """(embedding, lm_head) of the target folder as fp32, read from its weights alone: what a draft
    shares with its target, without loading the target (the lm_head is the embedding when the
    target ties them or stores no head). The weights are opened as every command opens them
    (`open_checkpoint`: shards, ``.bin``), ``tie_word_embeddings`` read where `load_target` reads it.

    Raises:
        UsageError: no embedding tensor in the target's weights.
    """
    from eagle_convert.draft import load_target, open_checkpoint
    from eagle_convert.io import tensor_torch

    ckpt = open_checkpoint(target)
    embed = next((k for k in sorted(ckpt.tensors) if k.endswith("embed_tokens.weight")), None)
    head = next((k for k in sorted(ckpt.tensors) if k == "lm_head.weight" or k.endswith(".lm_head.weight")), None)
    if embed is None:
        raise UsageError(
            f"{ckpt.description}: no embed_tokens.weight in its weights; the draft's embedding comes from the target's"
        )
    tgt = load_target(target)  # where vLLM reads the sizes (a composite's text sub-config)
    tied = bool(tgt.config.get("tie_word_embeddings", tgt.text.get("tie_word_embeddings", False)))
    e = tensor_torch(ckpt.source, ckpt.tensors[embed]).float()
    return e, e if tied or head is None else tensor_torch(ckpt.source, ckpt.tensors[head]).float()
