"""vLLM 0.33's rule for a speculators config's verifier: `vllm serve DRAFT` needs a hub repo id.

transformers_utils/config.py `maybe_override_with_speculators` (0.33.0) raises `ValueError: Speculators
verifier must name a remote model repository. Select local verifiers explicitly with --model and
--speculative-config.` when `speculators_config.verifier.name_or_path` is not a str, fails
huggingface_hub's `validate_repo_id`, or exists as a local path or symlink. 0.32.0 took any value.
Serving with `--model TARGET --speculative-config '{"model": DRAFT}'` never takes this path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def verifier_problem(name: Any) -> str | None:
    """Why vLLM 0.33 refuses `name` as a speculators verifier (None: it is a hub repo id)."""
    if not isinstance(name, str):
        return f"{name!r} is not a string"
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return f"{name!r} is not a hub repo id"
    path = Path(name)
    if path.exists() or path.is_symlink():
        return f"{name!r} exists as a local path"
    return None
