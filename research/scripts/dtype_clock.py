"""bf16 beside fp16 in the committed timings (analysis only; research/notes/known-gaps-log.md).

    python3 research/scripts/dtype_clock.py [h100|h200] [fa2_tc|sdpa-flash|sdpa-cudnn]

Pairs every launch timed in both dtypes (same B, H, N, d, mask and tiles) and prints, by tile and by launch length
(under 0.5 ms, 0.5-5 ms, over 5 ms), the mean of bf16's time over fp16's less one and the mean difference of the
SM clock the bench's spins read around their runs (spin_clock_mhz_before/after; they read up to 5% above the
maximum clock, research/notes/measurements.md, so only their differences are used). Run from the repository root.
"""
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel.evaluation import dataset  # noqa: E402

BANDS = ((5e-4, "< 0.5 ms"), (5e-3, "0.5-5 ms"), (np.inf, "> 5 ms"))


def pairs(gpu: str = "h100", kernel: str = "fa2_tc") -> dict:
    """(d, Br, Bc, warps, band) -> list of (bf16 time / fp16 time - 1, bf16 spin MHz - fp16 spin MHz)."""
    (ms,) = dataset.load([ROOT / "examples" / "measurements" / gpu / f"{kernel}.csv"])
    c = ms.cols
    spin = ms.spin_clock_mhz()
    index = {}
    for i, r in enumerate(ms.rows):
        key = tuple(int(c[k][i]) for k in ("B", "H", "N", "d", "Br", "Bc", "threads")) + (bool(ms.causal[i]),)
        index[(key, r["dtype"])] = i
    out = defaultdict(list)
    for (key, dtype), i in index.items():
        j = index.get((key, "bf16"))
        if dtype != "fp16" or j is None:
            continue
        band = next(name for top, name in BANDS if ms.measured_s[i] < top)
        out[(key[3], key[4], key[5], key[6] // 32, band)].append((ms.measured_s[j] / ms.measured_s[i] - 1,
                                                                  spin[j] - spin[i]))
    return out


def main(gpu: str = "h100", kernel: str = "fa2_tc"):
    print(f"{kernel} on {gpu.upper()}: bf16 beside fp16, by (d, Br, Bc, warps) and launch length")
    for key, v in sorted(pairs(gpu, kernel).items()):
        v = np.array(v)
        print(f"  {str(key[:4]):20s} {key[4]:9s} n={len(v):3d}  time {np.mean(v[:, 0]) * 100:+.2f}% "
              f"(sd {np.std(v[:, 0]) * 100:.2f})  spins {np.mean(v[:, 1]):+.0f} MHz")


if __name__ == "__main__":
    main(*sys.argv[1:3])
