"""The single home of the version (layer 0, imports nothing): pyproject reads it
(tool.setuptools.dynamic), provenance blocks and stage keys write it, `--version` prints it.

A constant, because importlib.metadata costs ~0.1 s of CLI start-up.
"""

__version__ = "0.1.0"
