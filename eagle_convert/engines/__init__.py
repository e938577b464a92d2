"""The engines a draft is served on besides vLLM (SGLang, TensorRT-LLM): their rules as data, per
release, each citing the file and function it was read from; `--for ENGINE[==VERSION]`; and whose
convention a draft's aux ids are in (the producers' training code as data)."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
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
    from eagle_convert.engines.serve_args import SGLANG_ALGORITHM, sglang_flag, trtllm_field
    from eagle_convert.engines.serve_file import GivenServe, read_serve_file
else:
    __getattr__, __dir__ = attach(__name__, __file__)
