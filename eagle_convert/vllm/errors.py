"""One-line error text for the vLLM engine worker (vLLM's messages can be very long)."""

from __future__ import annotations


def one_line_error(exc: BaseException) -> str:
    """``Type: first meaningful line`` of an exception (vLLM messages can be very long)."""
    name = type(exc).__name__
    msg = str(exc).strip()
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__module__.startswith("pydantic"):
        try:  # pydantic ValidationError: the first error's message and its wrapped exception type
            first = errors()[0]
            msg = str(first.get("msg", msg))
            inner = (first.get("ctx") or {}).get("error")
            if isinstance(inner, BaseException):
                name = type(inner).__name__
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        except Exception:
            pass
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    # Drop the long lists vLLM appends (every parameter, every registered architecture).
    for cut in (" The available parameters", " Supported architectures:"):
        text = text.split(cut, 1)[0]
    if len(text) > 500:
        text = text[:497] + "..."
    return f"{name}: {text}" if text else name
