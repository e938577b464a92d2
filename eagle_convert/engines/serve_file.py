"""A deployment's own serve config for SGLang or TensorRT-LLM, read as the engine reads it (`--serve-config`).

SGLang: a launch command or its arguments (`python -m sglang.launch_server --model-path ... \\`), one
flag per line or on one line, `--flag value` or `--flag=value`; or the YAML file `--config FILE`
takes (keys with dashes or underscores, srt/utils/server_args_config_parser.py
`ConfigArgumentMerger._convert_config_to_args`). TensorRT-LLM: the YAML `trtllm-serve
--extra_llm_api_options` reads, its `speculative_config` block (or the block alone). Names are
canonicalised through each engine's aliases (`serve_args.py`); what eagle-convert does not check is
kept as written.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_convert.engines import serve_args as sa
from eagle_convert.errors import UsageError
from eagle_convert.jsonable import Jsonable

MAX_BYTES = 1 << 20  # a serve config is a few lines; a bigger file is not one


@dataclass(frozen=True)
class GivenServe(Jsonable):
    """The flags (SGLang) or `speculative_config` fields (TensorRT-LLM) a deployment sets."""

    engine: str
    source: str  # the file, as given
    values: dict[str, Any] = field(default_factory=dict)  # canonical name -> value as written

    def get(self, name: str) -> Any:
        return self.values.get(name)


def _refuse(path: str, what: str, hint: str) -> UsageError:
    return UsageError(f"{{serve_config={path}}}: {what}", hint=hint, options=("serve_config",), file=path)


def _text(path: str) -> str:
    p = Path(path).expanduser()
    try:
        if not p.is_file():
            raise _refuse(path, "no such file", "give the file holding the launch command or the YAML config")
        if p.stat().st_size > MAX_BYTES:
            raise _refuse(path, f"larger than {MAX_BYTES} bytes, not a serve config", "give the serve config file")
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _refuse(path, f"cannot be read ({exc.__class__.__name__})", "give a readable UTF-8 text file") from None


def _yaml(text: str) -> Any:
    """The YAML document, or None where the text is no YAML mapping (a command line)."""
    import yaml  # PyYAML: a dependency of huggingface_hub, which eagle-convert requires

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _sglang_args(text: str) -> dict[str, Any]:
    tokens = shlex.split(text.replace("\\\n", " "), comments=True)
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("--"):
            continue
        name, eq, value = tok.partition("=")
        if not eq:
            value = tokens[i] if i < len(tokens) and not tokens[i].startswith("--") else ""
            i += 1 if value else 0
        arg = sa.sglang_flag(name)
        out[arg.name if arg else name] = value
    return out


def read_sglang(path: str) -> GivenServe:
    """An SGLang launch command, its arguments, or its `--config` YAML.

    Raises:
        UsageError: the file is missing, unreadable or sets no flag at all.
    """
    text = _text(path)
    data = _yaml(text)
    if data is not None and not any(str(k).startswith("-") for k in data):
        values = {}
        for key, value in data.items():
            name = "--" + str(key).replace("_", "-")
            arg = sa.sglang_flag(name)
            values[arg.name if arg else name] = value if not isinstance(value, (int, float)) else str(value)
    else:
        values = _sglang_args(text)
    if not values:
        raise _refuse(
            path,
            "sets no SGLang flag",
            "give the launch command line (python -m sglang.launch_server ...) or the YAML of its config flag",
        )
    return GivenServe("sglang", path, values)


def read_trtllm(path: str) -> GivenServe:
    """The `speculative_config` block of a TensorRT-LLM LLM API options YAML.

    Raises:
        UsageError: the file is missing, unreadable, not a YAML mapping, or has no speculative_config.
    """
    text = _text(path)
    data = _yaml(text)
    if data is None:
        raise _refuse(path, "is not a YAML mapping", "give the YAML that trtllm-serve reads as extra_llm_api_options")
    block = data.get(sa.TRTLLM_BLOCK, data if "decoding_type" in data else None)
    if not isinstance(block, dict):
        raise _refuse(
            path,
            f"has no {sa.TRTLLM_BLOCK} mapping",
            f"write {sa.TRTLLM_BLOCK}: {{decoding_type: Eagle3, max_draft_len: K, speculative_model_dir: DRAFT}}",
        )
    values = {}
    for key, value in block.items():
        arg = sa.trtllm_field(str(key))
        values[arg.name if arg else str(key)] = value
    return GivenServe("trtllm", path, values)


def read_serve_file(path: str, engine: str) -> GivenServe:
    """`path` read as `engine`'s serve config ("sglang" or "trtllm").

    Raises:
        UsageError: vLLM (its serve config is --speculative-config), or a file `read_sglang` /
            `read_trtllm` refuses.
    """
    if engine == "sglang":
        return read_sglang(path)
    if engine == "trtllm":
        return read_trtllm(path)
    raise UsageError(
        f"{{serve_config={path}}} is for {{serve_for=sglang}} or {{serve_for=trtllm}}",
        hint="give vLLM's serve config as {speculative_config}",
        options=("serve_config", "serve_for", "speculative_config"),
    )
