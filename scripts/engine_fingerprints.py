"""Fingerprint an engine release's deciding units into eagle_convert/data/engine_fingerprints.json.

Run: `python scripts/engine_fingerprints.py sglang 0.5.23 /path/to/unzipped/wheel/sglang` (the package
folder of `pip download sglang==0.5.23 --no-deps`, unzipped; never installed). The units are each
release module's `DECIDING` (eagle_convert/engines/sglang.py); `engines/fingerprints.py` compares an
installed engine with them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eagle_convert.engines import ENGINES
from eagle_convert.engines.fingerprints import DATA_FILE, fingerprint

OUT = Path(__file__).resolve().parent.parent / "eagle_convert" / "data" / DATA_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=[n for n in ENGINES if ENGINES[n].deciding])
    parser.add_argument("release")
    parser.add_argument("package", type=Path, help="the engine's package folder, unzipped from its wheel")
    args = parser.parse_args(argv)
    engine = ENGINES[args.engine]
    units = fingerprint(args.package, engine.deciding)
    missing = [f for f in engine.deciding if f not in units]
    if missing:
        parser.error(f"{args.package}: no such deciding files: {', '.join(missing)}")
    data = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    data.setdefault(
        "$comment",
        "Deciding-unit digests per engine release (scripts/engine_fingerprints.py); see engines/fingerprints.py.",
    )
    data["format"] = 1
    data.setdefault("engines", {}).setdefault(args.engine, {})[args.release] = {
        "source": f"{engine.title} {args.release} wheel",
        "units": units,
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{OUT}: {sum(map(len, units.values()))} units of {args.engine} {args.release}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
