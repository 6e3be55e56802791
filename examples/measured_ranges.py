"""Write perfmodel/evaluation/measured_ranges.json: per kernel, GPU and pass, the smallest and largest Nq, Nk, d and
B*H that the committed measurements (examples/measurements/<gpu>/*.csv) hold. `perfmodel llm` flags a shape outside
them, since the error figures say nothing there; the wheel carries no CSVs, so it reads this file.

    python examples/measured_ranges.py            # rewrite the JSON
    python examples/measured_ranges.py --check    # exit 1 where it differs from the CSVs

The sealed seventh off-grid set (*.offgrid7.csv) is left out: it is not scored yet. Rows of the older schema (one N)
count as Nq = Nk = N, forward. A pass is "fwd" or "bwd" (rows of mode bwd and fwd_bwd: a training step's
backward)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "examples" / "measurements"
OUT = ROOT / "perfmodel" / "evaluation" / "measured_ranges.json"
AXES = ("Nq", "Nk", "d", "BH")


def _gpu_key(device_name: str, cache: dict) -> str | None:
    if device_name not in cache:
        from perfmodel.hw.gpu import match_device_name

        spec = match_device_name(device_name)
        cache[device_name] = spec.key if spec else None
    return cache[device_name]


def ranges(folder: Path = MEASUREMENTS) -> dict:
    """kernel -> gpu key -> pass -> {axis: [lo, hi], "rows": n}."""
    out: dict = {}
    names: dict = {}
    for path in sorted(folder.glob("*/*.csv")):
        if ".offgrid7." in path.name:
            continue
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                gpu = _gpu_key(row["gpu_name"], names)
                if gpu is None:
                    continue
                n = row.get("N")
                nq, nk = int(row.get("Nq") or n), int(row.get("Nk") or n)
                mode = row.get("mode") or "fwd"
                vals = {"Nq": nq, "Nk": nk, "d": int(row["d"]), "BH": int(row["B"]) * int(row["H"])}
                entry = out.setdefault(row["kernel"], {}).setdefault(gpu, {}).setdefault(
                    "fwd" if mode == "fwd" else "bwd", {"rows": 0})
                entry["rows"] += 1
                for a, v in vals.items():
                    lo, hi = entry.get(a, (v, v))
                    entry[a] = [min(lo, v), max(hi, v)]
    return {k: {g: {p: dict(sorted(e.items())) for p, e in sorted(by.items())} for g, by in sorted(gs.items())}
            for k, gs in sorted(out.items())}


def text(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv) -> int:
    sys.path.insert(0, str(ROOT))
    fresh = text(ranges())
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text() == fresh
        print("up to date" if same else f"{OUT} differs from the CSVs: rerun python examples/measured_ranges.py")
        return 0 if same else 1
    OUT.write_text(fresh)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
