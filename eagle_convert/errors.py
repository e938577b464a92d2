"""One exception hierarchy for the library; `cli/app.py` maps it to messages and exit codes.

Every error carries a one-line, user-facing message that names the file, tensor or field and,
where there is one, the fix (`hint`), plus the same facts as fields (`file`, `field`, `tensor`) for
callers that act on them. Subclasses also inherit a builtin where natural so that callers using
plain Python can catch them idiomatically.

The library speaks in its own terms, not in command-line flags: where a message names an option of
the call that failed, it writes `{name}` (or `{name=value}`) with the keyword argument's name and
lists the name in `options`. `str(exc)` spells it as the Python keyword (`` `force` ``,
`` `layout=speculators` ``); the command line spells it as the flag that sets it (`--force`,
`--layout speculators`), from one table (`cli/errors.py`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from os import PathLike

# `{name}` or `{name=value}` in a message: an option of the call, spelled by whoever shows it.
_OPTION = re.compile(r"\{([a-z][a-z0-9_]*)(?:=([^{}]*))?\}")

Spelling = Callable[[str, "str | None"], str]


def library_spelling(name: str, value: str | None) -> str:
    """How `str(exc)` names an option: the keyword argument, `` `name` `` or `` `name=value` ``."""
    return f"`{name}`" if value is None else f"`{name}={value}`"


class EagleConvertError(Exception):
    """Base class: an expected, explainable failure (exit code 1).

    Args:
        message: One line naming the file, tensor or field; `{name}` / `{name=value}` for each
            option in `options`.
        hint: The fix, shown in parentheses after the message; may name options as `message` does.
        options: The options (keyword names) the message and hint name.
        file: The file or folder the error is about.
        field: The config field the error is about.
        tensor: The tensor the error is about.
    """

    exit_code: int = 1

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        options: Iterable[str] = (),
        file: str | PathLike[str] | None = None,
        field: str | None = None,
        tensor: str | None = None,
    ) -> None:
        self.options = tuple(options)
        self.template = message
        self.hint_template = hint
        self.file = None if file is None else str(file)
        self.field = field
        self.tensor = tensor
        super().__init__(self.message)

    def _spell(self, text: str, spelling: Spelling) -> str:
        if not self.options:
            return text

        def one(m: re.Match[str]) -> str:
            return spelling(m.group(1), m.group(2)) if m.group(1) in self.options else m.group(0)

        return _OPTION.sub(one, text)

    @property
    def message(self) -> str:
        """The message in the library's terms (without the hint)."""
        return self._spell(self.template, library_spelling)

    @message.setter
    def message(self, value: str) -> None:
        # A caller that prefixes the message (`f"stage x: {exc.message}"`) keeps its options.
        old = self.message
        self.template = value.replace(old, self.template) if old and old in value else value

    @property
    def hint(self) -> str | None:
        """The fix in the library's terms, or None."""
        return None if self.hint_template is None else self._spell(self.hint_template, library_spelling)

    @hint.setter
    def hint(self, value: str | None) -> None:
        self.hint_template = value

    @property
    def fix(self) -> str | None:
        """The fix (the same as `hint`)."""
        return self.hint

    def render(self, spelling: Spelling = library_spelling) -> str:
        """The message and its hint, each option spelled by `spelling(name, value)`.

        Args:
            spelling: Names an option: `library_spelling` (the default, what `str()` gives) or the
                command line's flag table (`cli/errors.py`).

        Returns:
            `message (hint)`, or `message` without a hint.
        """
        message = self._spell(self.template, spelling)
        if self.hint_template is None or not self.hint_template:
            return message
        return f"{message} ({self._spell(self.hint_template, spelling)})"

    def __str__(self) -> str:
        return self.render(library_spelling)


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
    """The output location is unusable (exists without `force`, inside the input, not writable)."""


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

    def __init__(self, message: str, *, extra: str, missing: list[str], options: Iterable[str] = ()) -> None:
        super().__init__(message, options=options)
        self.extra = extra
        self.missing = missing


class NotADraftError(UnknownLayoutError):
    """The checkpoint is not an EAGLE-3 draft (a target model, MTP head, Medusa, DFlash, ...), or a
    draft kind the command cannot handle; `kind` is the `not_drafts` rule id of schemas/layouts.json."""

    def __init__(self, message: str, *, kind: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind


class PushRefusedError(EagleConvertError):
    """`push`: the draft fails validation, so nothing was uploaded (pass allow_invalid to push it anyway)."""
