"""The serving flags and fields eagle-convert emits or checks, as each engine's own parser declares them.

Every serve command `serve.py` writes, and every serve config `validate --serve-config` reads, uses
only the names below; each entry is the name, its type and choices as the engine's parser or
dataclass declares them, and the file and line it was read from (the evidence a test compares every
emitted flag or field against). Read, never run:

- SGLang 0.5.23 (its wheel, `pip download sglang==0.5.23 --no-deps`): `python -m sglang.launch_server`
  builds its parser with `ServerArgs.add_cli_args` (`srt/server_args.py` l. 351), which turns each
  annotated field of the `srt/arg_groups/fields/*.py` records into `--` + the field name with dashes
  (`srt/arg_groups/arg_utils.py` l. 288 `_field_to_cli_name`; `Optional[int]` -> `type=int`, l. 267
  `_infer_type_func`); `--config FILE` merges a YAML file of the same names
  (`srt/utils/server_args_config_parser.py` `ConfigArgumentMerger`).
- TensorRT-LLM (`tensorrt_llm/llmapi/llm_args.py` @ 0004396720054fd8e205cbf616f21f0b57c6b412, a version
  with `Eagle3DecodingConfig`, `eagle3_layers_to_capture` and `eagle3_model_arch`): the `speculative_config` block of the YAML given to
  `trtllm-serve --extra_llm_api_options` is parsed by `DecodingBaseConfig.from_dict` into
  `Eagle3DecodingConfig`, a pydantic model; no line numbers are cited for it because the index serves
  that file by character offset, not from a tagged checkout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_SPEC = "srt/arg_groups/fields/spec.py"
_MODEL = "srt/arg_groups/fields/model.py"
_ARGS = "tensorrt_llm/llmapi/llm_args.py @ 000439672005"


@dataclass(frozen=True)
class ServeArg:
    """One flag or field: its name, its type as declared, its choices, aliases, and where it was read."""

    name: str  # "--speculative-num-steps" (a flag) or "max_draft_len" (a field)
    type: str  # "str" | "int" | "set[int]"
    cite: str  # file:line and the declaration
    choices: tuple[Any, ...] = ()  # a Literal's values (empty: any value of the type)
    aliases: tuple[str, ...] = ()  # other spellings the parser accepts for the same field

    def accepts(self, value: Any) -> bool:
        """Whether `value` (as emitted: a string on a command line, a YAML value in a config) is of this type."""
        if self.choices and value not in self.choices:
            return False
        if self.type == "int":
            if isinstance(value, str):
                return value.lstrip("-").isdigit()
            return isinstance(value, int) and not isinstance(value, bool)
        if self.type == "set[int]":
            items = list(value) if isinstance(value, (list, tuple, set)) else None
            return items is not None and all(isinstance(v, int) and not isinstance(v, bool) for v in items)
        return isinstance(value, str)


SGLANG_LAUNCH = "python -m sglang.launch_server"  # sglang/launch_server.py: prepare_server_args(sys.argv[1:])

SGLANG_FLAGS: dict[str, ServeArg] = {
    a.name: a
    for a in (
        ServeArg("--model-path", "str", f"{_MODEL}:51 model_path: A[str, Arg(aliases=['--model'])]", (), ("--model",)),
        ServeArg("--speculative-algorithm", "str", f"{_SPEC}:31 speculative_algorithm: A[Optional[str], ...]"),
        ServeArg(
            "--speculative-draft-model-path",
            "str",
            f"{_SPEC}:36 speculative_draft_model_path: A[Optional[str], Arg(aliases=['--speculative-draft-model'])]",
            (),
            ("--speculative-draft-model",),
        ),
        ServeArg("--speculative-num-steps", "int", f"{_SPEC}:58 speculative_num_steps: A[Optional[int], ...]"),
        ServeArg("--speculative-eagle-topk", "int", f"{_SPEC}:62 speculative_eagle_topk: A[Optional[int], ...]"),
        ServeArg(
            "--speculative-num-draft-tokens", "int", f"{_SPEC}:66 speculative_num_draft_tokens: A[Optional[int], ...]"
        ),
        ServeArg(
            "--speculative-draft-window-size",
            "int",
            f"{_SPEC}:165 speculative_draft_window_size: A[Optional[int], ...]",
        ),
    )
}
# The algorithm name an EAGLE-3 draft needs (srt/speculative/spec_info.py l. 43 SpeculativeAlgorithm.EAGLE3;
# spec.py l. 31 lists the builtins EAGLE, EAGLE3, ...: EAGLE runs an EAGLE-1/2 draft without aux states).
SGLANG_ALGORITHM = "EAGLE3"
# With topk 1, SGLang sets num_draft_tokens to num_steps + 1 (srt/arg_groups/speculative_hook.py l. 1256).
SGLANG_CHAIN_TOPK = 1

TRTLLM_FIELDS: dict[str, ServeArg] = {
    a.name: a
    for a in (
        ServeArg(
            "decoding_type",
            "str",
            f"{_ARGS} Eagle3DecodingConfig.decoding_type: Literal['Eagle3'] (DecodingBaseConfig.from_dict dispatches on it)",
            ("Eagle3",),
        ),
        ServeArg("max_draft_len", "int", f"{_ARGS} DecodingBaseConfig.max_draft_len: Optional[NonNegativeInt]"),
        ServeArg(
            "speculative_model_dir",
            "str",
            f"{_ARGS} DecodingBaseConfig.speculative_model: Optional[Union[str, Path]], "
            "validation_alias=AliasChoices('speculative_model', 'speculative_model_dir')",
            (),
            ("speculative_model",),
        ),
        ServeArg(
            "eagle3_layers_to_capture",
            "set[int]",
            f"{_ARGS} EagleDecodingConfig.eagle3_layers_to_capture: Optional[Set[int]] "
            "(default {1, num_layers//2-1, num_layers-4})",
        ),
        ServeArg(
            "eagle3_model_arch",
            "str",
            f"{_ARGS} EagleDecodingConfig.eagle3_model_arch: Literal['llama3', 'mistral_large3'] = 'llama3'",
            ("llama3", "mistral_large3"),
        ),
    )
}
TRTLLM_BLOCK = "speculative_config"  # the LLM API option the fields above sit in (TorchLlmArgs.speculative_config)
TRTLLM_SERVE = "trtllm-serve"  # tensorrt_llm/commands/serve.py serve(model, ...): the target as its argument
TRTLLM_SERVE_FLAGS: dict[str, ServeArg] = {
    "--extra_llm_api_options": ServeArg(
        "--extra_llm_api_options",
        "str",
        "tensorrt_llm/commands/serve.py serve: @click.option('--extra_llm_api_options', type=str): a YAML file "
        "that overwrites the LLM API options",
    )
}
# The Eagle3 class TensorRT-LLM builds for a Llama-style or MLA draft (kv_lora_rank decides MLA:
# _torch/models/modeling_speculative.py Eagle3ForCausalLM.__init__); mistral_large3 is the Mistral
# Large 3 draft, which captures {-1} (llm_args.py EagleDecodingConfig.validate_eagle_config).
TRTLLM_MODEL_ARCH = "llama3"


def sglang_flag(name: str) -> ServeArg | None:
    """The SGLang flag `name` is (its own name or an alias), else None."""
    return next((arg for arg in SGLANG_FLAGS.values() if name == arg.name or name in arg.aliases), None)


def trtllm_field(name: str) -> ServeArg | None:
    """The TensorRT-LLM field `name` is (its own name or an alias), else None."""
    return next((arg for arg in TRTLLM_FIELDS.values() if name == arg.name or name in arg.aliases), None)
