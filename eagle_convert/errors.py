"""One exception hierarchy for the library; `cli/app.py` maps it to messages and exit codes.

Every error carries a one-line, user-facing message that names the file, tensor or field and,
where there is one, the fix. Subclasses also inherit a builtin where natural so that callers
using plain Python can catch them idiomatically.
"""

from __future__ import annotations


class EagleConvertError(Exception):
    """Base class: an expected, explainable failure (exit code 1)."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class UsageError(EagleConvertError, ValueError):
    """The command line asks for something impossible (exit code 2)."""

    exit_code = 2


class CheckpointNotFoundError(EagleConvertError, FileNotFoundError):
    """A local path does not exist or holds no checkpoint."""


class CheckpointReadError(EagleConvertError, OSError):
    """A file exists but cannot be read: unreadable, truncated, corrupt header."""


class ConfigError(EagleConvertError, ValueError):
    """config.json is missing, not JSON, or lacks a field that cannot be inferred."""


class UnknownLayoutError(EagleConvertError):
    """The tensors match no known EAGLE-3 producer layout."""


class HubError(EagleConvertError):
    """Base for Hugging Face Hub failures; subclasses keep the causes distinct."""


class HubNotFoundError(HubError, FileNotFoundError):
    """Repository, revision or file does not exist (or is private and no token was given)."""


class HubGatedError(HubError, PermissionError):
    """Repository is gated or the token lacks access."""


class HubOfflineError(HubError, ConnectionError):
    """Offline mode is on (HF_HUB_OFFLINE) or the endpoint is unreachable, and nothing is cached."""


class UpgradeRefusedError(EagleConvertError):
    """The input cannot be upgraded as asked (already 3.1, norm_before_fc, inconsistent flags)."""


class OutputError(EagleConvertError, OSError):
    """The output location is unusable (exists without --force, inside the input, not writable)."""


class VerificationError(EagleConvertError):
    """A written output does not match its plan (byte mismatch, wrong header)."""


class EngineError(EagleConvertError):
    """vLLM is missing, or failed outside the check it was asked to run."""


class MissingExtraError(EagleConvertError, ImportError):
    """A command needs an optional dependency group that is not installed (exit code 2).

    The lean install (inspect, validate, upgrade, diff) has no torch; `extras.require` raises this
    with the `pip install 'eagle-convert[EXTRA]'` line that fixes it.
    """

    exit_code = 2

    def __init__(self, message: str, *, extra: str, missing: list[str]) -> None:
        super().__init__(message)
        self.extra = extra
        self.missing = missing


class NotADraftError(UnknownLayoutError):
    """The checkpoint is not an EAGLE-3 draft (a target model, MTP head, Medusa, DFlash, ...), or a
    draft kind the command cannot handle; `kind` is the `not_drafts` rule id of schemas/layouts.json."""

    def __init__(self, message: str, *, kind: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind


class PushRefusedError(EagleConvertError):
    """`push`: the draft fails validation, so nothing was uploaded (pass force to push it anyway)."""
