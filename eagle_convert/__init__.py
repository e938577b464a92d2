"""eagle-convert: inspect, upgrade (EAGLE-3 to 3.1), validate and smoke-test EAGLE-3 draft models."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eagle-convert")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+local"

__all__ = ["__version__"]
