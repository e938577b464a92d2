"""The target model as vLLM reads its config.json: one reading for every command.

A draft belongs to one target: the layers it taps, the width of the states it fuses, its vocabulary,
rope and context all come from the target's config. vLLM reads them from `ModelConfig.hf_text_config`
(vLLM 0.21-0.34 `transformers_utils/config.py` `get_hf_text_config`, which is transformers'
`PreTrainedConfig.get_text_config()`): for a composite (multimodal) config, the one text sub-config
(`tables.TEXT_CONFIG_KEYS`, in practice `text_config`) used whole, so a top-level num_hidden_layers
beside a `text_config` is never read; without one, the top level. The sizes come from there
(`transformers_utils/model_arch_config_convertor.py` `ModelArchConfigConvertorBase.get_num_hidden_layers`,
`get_hidden_size`, `get_vocab_size`, `derive_max_model_len_and_key`). Only quantization_config and
dtype are read at the top level first (`get_quantization_config`, `get_torch_dtype`).

Validate, check, upgrade, finetune, calibration and smoke all read a target through `Target`; no
other module reads `text_config` or a target's num_hidden_layers (tests/test_vllm_model.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.draft.checkpoint import CONFIG_FNAME, CheckpointRef
from eagle_convert.draft.kind import SWAP, ensure_target_config
from eagle_convert.errors import CheckpointNotFoundError, ConfigError
from eagle_convert.io import LocalSource, Source, read_json
from eagle_convert.vllm_model import (
    DRAFT_QUANT_SOURCE,
    TEXT_CONFIG_KEYS,
    positive_int,
    rope_declared,
    rope_is_nested,
    rope_parameters,
    rope_theta_declared,
)


def text_config(config: Mapping[str, Any], where: str = "target") -> tuple[dict[str, Any], str | None]:
    """(the config vLLM reads the target's sizes from, the key it sits under; None: the top level).

    Raises:
        ConfigError: two text sub-configs (transformers' get_text_config raises), or one that is not an object.
    """
    keys = [k for k in TEXT_CONFIG_KEYS if config.get(k) is not None]
    if len(keys) > 1:
        raise ConfigError(
            f"{where}/config.json: several text configs ({', '.join(keys)}): vLLM (transformers' "
            "get_text_config) refuses to choose",
            hint="keep one text sub-config",
        )
    if not keys:
        return dict(config), None
    sub = config[keys[0]]
    if not isinstance(sub, dict):
        raise ConfigError(f"{where}/config.json: {keys[0]} is not an object", hint="fix the target's config.json")
    return dict(sub), keys[0]


@dataclass(frozen=True)
class Target:
    """A target (verifier) model's config.json, read once the way vLLM reads it."""

    ref: str  # as the user named it (written into speculators configs and messages)
    description: str  # its source's description (folder, repo@revision)
    config: dict[str, Any] = field(repr=False)  # config.json as written
    text: dict[str, Any] = field(repr=False)  # the config vLLM reads the sizes from (see module doc)
    text_key: str | None  # where `text` sits ("text_config"); None: the top level
    num_layers: int | None  # num_hidden_layers; None when missing or not a positive integer
    hidden_size: int | None
    vocab_size: int | None
    max_position_embeddings: int | None  # the target's context
    rope: dict[str, Any] | None  # vllm_model.config.rope_parameters(text); None for per-layer-type rope
    rope_declared: bool  # the text config sets a rope field (else its class's rope applies)
    rope_theta_declared: bool  # rope_theta is written, not the class default
    model_type: str | None  # the top level's: the config class vLLM builds
    architectures: tuple[str, ...]
    quantization: dict[str, Any] | None = field(default=None, repr=False)
    dtype: str | None = None  # config dtype / torch_dtype (top level first, then the text config)
    source: Source | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], ref: str, *, description: str | None = None, source: Source | None = None
    ) -> Target:
        """Read `config` (a target's config.json).

        Raises:
            ConfigError: the text sub-config is ambiguous or not an object.
        """
        where = description or ref
        text, key = text_config(config, where)
        archs = config.get("architectures")
        quant = config.get(DRAFT_QUANT_SOURCE)
        if not isinstance(quant, dict) and key == "text_config":  # get_quantization_config reads text_config next
            quant = text.get(DRAFT_QUANT_SOURCE)
        dtype = next(
            (d for c in (config, text) for k in ("dtype", "torch_dtype") if isinstance(d := c.get(k), str)), None
        )
        model_type = config.get("model_type")
        return cls(
            ref=ref,
            description=where,
            config=dict(config),
            text=text,
            text_key=key,
            num_layers=positive_int(text.get("num_hidden_layers")),
            hidden_size=positive_int(text.get("hidden_size")),
            vocab_size=positive_int(text.get("vocab_size")),
            max_position_embeddings=positive_int(text.get("max_position_embeddings")),
            rope=None if rope_is_nested(text) else rope_parameters({"model_type": model_type, **text}),
            rope_declared=rope_declared(text),
            rope_theta_declared=rope_theta_declared(text),
            model_type=model_type if isinstance(model_type, str) else None,
            architectures=tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
            quantization=quant if isinstance(quant, dict) else None,
            dtype=dtype,
            source=source,
        )

    @classmethod
    def from_folder(cls, folder: str | Path, ref: str | None = None) -> Target:
        """The config.json of a local target folder (the commands that run the target: smoke, finetune).

        Raises:
            ConfigError: config.json is not a JSON object, or its text sub-config is ambiguous.
        """
        source = LocalSource(Path(folder))
        return cls.from_config(read_json(source, CONFIG_FNAME), ref or str(folder), source=source)

    def require_layers(self, hint: str, options: tuple[str, ...] = ()) -> int:
        """num_hidden_layers, for the commands that cannot go on without it.

        Args:
            hint: the fix the error names.
            options: the library options the hint names (`{name}` in it; the CLI shows their flags).

        Raises:
            ConfigError: the text config has no positive integer num_hidden_layers.
        """
        if self.num_layers is None:
            raise ConfigError(
                f"{self.ref}/config.json: no positive num_hidden_layers",
                hint=hint,
                options=options,
                file=f"{self.ref}/config.json",
                field="num_hidden_layers",
            )
        return self.num_layers


def load_target(ref: str | Path, *, swap: str = SWAP) -> Target:
    """A target folder, a config file in it, or a hub repo; only the config is read, never weights.

    Raises:
        CheckpointNotFoundError: no config.json there.
        NotADraftError: the config is an EAGLE-3 draft's (`swap` says which arguments to swap).
        ConfigError: the config is not JSON or its text sub-config is ambiguous.
    """
    parsed = CheckpointRef.parse(str(ref))
    name = CONFIG_FNAME
    if parsed.is_hub:
        from eagle_convert.io import HubSource

        source: Source = HubSource(parsed.repo, parsed.revision)  # type: ignore[arg-type]
    else:
        path = parsed.local
        if path is not None and path.is_file() and path.suffix == ".json":
            path, name = path.parent, path.name
        source = LocalSource(path)  # type: ignore[arg-type]
    if name not in source.list_files():
        raise CheckpointNotFoundError(
            f"{source.description}: no config.json (needed by {{target}})",
            hint="pass the target model's folder or hub repo id",
            options=("target",),
        )
    config = read_json(source, name)
    ensure_target_config(config, f"--target {source.description}", swap=swap)
    return Target.from_config(config, str(ref), description=source.description, source=source)
