"""eagle-convert: inspect, upgrade (EAGLE-3 to 3.1), validate and smoke-test EAGLE-3 draft models."""

from __future__ import annotations

# The single home of the version: pyproject reads it (tool.setuptools.dynamic), provenance
# blocks write it. A constant, because importlib.metadata costs ~0.1 s of CLI start-up.
__version__ = "0.1.0"

__all__ = ["__version__"]
