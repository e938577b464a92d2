"""Every use of vLLM's own (private) APIs: the strict load check and the spec-decode run, in a subprocess."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.vllm.current import engine_session, use_session
    from eagle_convert.vllm.drift_rounds import VllmDriftRequest, VllmRound, vllm_drift_rounds
    from eagle_convert.vllm.known_issues import sampling_issues
    from eagle_convert.vllm.session import (
        ENGINE_TIMEOUT_S,
        MAX_NUM_SEQS,
        EngineRun,
        EngineSession,
        PassResult,
        PassSpec,
    )
    from eagle_convert.vllm.sharing import engine_order
    from eagle_convert.vllm.strict_load import check_with_vllm
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "check_with_vllm": "eagle_convert.vllm.strict_load",
            "engine_session": "eagle_convert.vllm.current",
            "use_session": "eagle_convert.vllm.current",
            "sampling_issues": "eagle_convert.vllm.known_issues",
            "VllmDriftRequest": "eagle_convert.vllm.drift_rounds",
            "VllmRound": "eagle_convert.vllm.drift_rounds",
            "vllm_drift_rounds": "eagle_convert.vllm.drift_rounds",
            "ENGINE_TIMEOUT_S": "eagle_convert.vllm.session",
            "MAX_NUM_SEQS": "eagle_convert.vllm.session",
            "EngineRun": "eagle_convert.vllm.session",
            "EngineSession": "eagle_convert.vllm.session",
            "PassResult": "eagle_convert.vllm.session",
            "PassSpec": "eagle_convert.vllm.session",
            "engine_order": "eagle_convert.vllm.sharing",
        },
    )

__all__ = [
    "ENGINE_TIMEOUT_S",
    "MAX_NUM_SEQS",
    "check_with_vllm",
    "engine_order",
    "engine_session",
    "EngineRun",
    "EngineSession",
    "PassResult",
    "PassSpec",
    "sampling_issues",
    "use_session",
    "VllmDriftRequest",
    "VllmRound",
    "vllm_drift_rounds",
]
