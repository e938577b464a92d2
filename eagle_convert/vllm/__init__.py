"""Every use of vLLM's own (private) APIs: the strict load check and the spec-decode run, in a subprocess."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
    from eagle_convert.vllm.current import engine_session, use_session
    from eagle_convert.vllm.drift_rounds import vllm_drift_rounds
    from eagle_convert.vllm.engine_run import EngineRun, PassResult, PassSpec
    from eagle_convert.vllm.known_issues import sampling_issues
    from eagle_convert.vllm.session import ENGINE_TIMEOUT_S, MAX_NUM_SEQS, EngineSession
    from eagle_convert.vllm.sharing import engine_order
    from eagle_convert.vllm.strict_load import check_with_vllm
else:
    __getattr__, __dir__ = attach(__name__, __file__)
