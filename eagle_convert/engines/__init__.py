"""The engines a draft is served on besides vLLM (SGLang, TensorRT-LLM): their rules as data, per
release, each citing the file and function it was read from; `--for ENGINE[==VERSION]`; and whose
convention a draft's aux ids are in (the producers' training code as data)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.engines.producers import (
        CAVEATS,
        PRODUCERS,
        Conversion,
        Producer,
        convert,
        fmt_taps,
        producer_for,
        trained_on,
        written_ids,
    )
    from eagle_convert.engines.reading import (
        DEFAULT,
        EngineView,
        default_taps,
        ids_for,
        int_ids,
        read_draft,
        taps,
    )
    from eagle_convert.engines.rules import EngineRules, Offset
    from eagle_convert.engines.select import (
        ALL,
        ENGINE_NAMES,
        ENGINES,
        VLLM,
        Engine,
        EngineStatus,
        engine_status,
        every_release,
        parse_for,
    )
    from eagle_convert.engines.serve import Draft, ServeCommand, serve_command, serve_commands
    from eagle_convert.engines.serve_args import SGLANG_ALGORITHM, ServeArg, sglang_flag, trtllm_field
    from eagle_convert.engines.serve_file import GivenServe, read_serve_file
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "CAVEATS": "eagle_convert.engines.producers",
            "PRODUCERS": "eagle_convert.engines.producers",
            "fmt_taps": "eagle_convert.engines.producers",
            "Conversion": "eagle_convert.engines.producers",
            "Producer": "eagle_convert.engines.producers",
            "convert": "eagle_convert.engines.producers",
            "producer_for": "eagle_convert.engines.producers",
            "trained_on": "eagle_convert.engines.producers",
            "written_ids": "eagle_convert.engines.producers",
            "DEFAULT": "eagle_convert.engines.reading",
            "EngineView": "eagle_convert.engines.reading",
            "ids_for": "eagle_convert.engines.reading",
            "default_taps": "eagle_convert.engines.reading",
            "int_ids": "eagle_convert.engines.reading",
            "read_draft": "eagle_convert.engines.reading",
            "taps": "eagle_convert.engines.reading",
            "EngineRules": "eagle_convert.engines.rules",
            "Offset": "eagle_convert.engines.rules",
            "ALL": "eagle_convert.engines.select",
            "ENGINES": "eagle_convert.engines.select",
            "ENGINE_NAMES": "eagle_convert.engines.select",
            "VLLM": "eagle_convert.engines.select",
            "Engine": "eagle_convert.engines.select",
            "EngineStatus": "eagle_convert.engines.select",
            "engine_status": "eagle_convert.engines.select",
            "every_release": "eagle_convert.engines.select",
            "parse_for": "eagle_convert.engines.select",
            "Draft": "eagle_convert.engines.serve",
            "ServeCommand": "eagle_convert.engines.serve",
            "serve_command": "eagle_convert.engines.serve",
            "serve_commands": "eagle_convert.engines.serve",
            "GivenServe": "eagle_convert.engines.serve_file",
            "read_serve_file": "eagle_convert.engines.serve_file",
            "SGLANG_ALGORITHM": "eagle_convert.engines.serve_args",
            "ServeArg": "eagle_convert.engines.serve_args",
            "sglang_flag": "eagle_convert.engines.serve_args",
            "trtllm_field": "eagle_convert.engines.serve_args",
        },
    )

__all__ = [
    "ALL",
    "SGLANG_ALGORITHM",
    "DEFAULT",
    "Draft",
    "CAVEATS",
    "PRODUCERS",
    "ENGINES",
    "ENGINE_NAMES",
    "VLLM",
    "Conversion",
    "Engine",
    "EngineRules",
    "EngineStatus",
    "EngineView",
    "GivenServe",
    "ServeCommand",
    "Offset",
    "ServeArg",
    "Producer",
    "convert",
    "default_taps",
    "engine_status",
    "every_release",
    "fmt_taps",
    "ids_for",
    "int_ids",
    "parse_for",
    "producer_for",
    "read_draft",
    "read_serve_file",
    "serve_command",
    "serve_commands",
    "sglang_flag",
    "taps",
    "trtllm_field",
    "trained_on",
    "written_ids",
]
