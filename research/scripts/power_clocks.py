"""The power model's clocks beside the spins' (analysis only; nothing is fitted here).

    python3 research/scripts/power_clocks.py gpus/calibration/h100-sxm.yaml [h100] [fa2_tc|sdpa-flash|sdpa-cudnn]

For each kernel's committed launches longer than 5 ms: the SM clock the power limit holds the launch to
(perfmodel.model.power, with the calibration's power block; for a kernel with fitted path costs, which the model
leaves at its clock, the clock the limit would hold it to) beside the clock the bench's spins read around
its runs (spin_clock_mhz_before/after, which read up to 5% above the maximum clock: research/notes/measurements.md), by tile
(fa2_tc) or by head dimension and mask (the libraries); and their correlation over the launches. Run from the
repository root.
"""
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel import api  # noqa: E402
from perfmodel.evaluation import dataset, validate  # noqa: E402
from perfmodel.hw import calibration  # noqa: E402
from perfmodel.kernels import get  # noqa: E402
from perfmodel.model import power  # noqa: E402

LONG_S = 5e-3


def clocks(cal_path: str, gpu: str = "h100", kernel: str = "fa2_tc"):
    """(rows, model clock MHz, spin clock MHz, long-launch mask) of a kernel's committed dataset."""
    (ms,) = dataset.load([ROOT / "examples" / "measurements" / gpu / f"{kernel}.csv"])
    spec = api.load_gpu(gpu)
    model = np.zeros(len(ms))
    cal = calibration.resolve(spec, cal_path)
    for m, p in validate.row_predictions(ms, spec, cal):
        clock = np.asarray(p.timing.clock_hz, dtype=float)
        if cal.power and cal.fitted(get(kernel).fit_key):
            clock, _ = power.capped_clock(p.time_s, power.launch_energy_j(p.counts, p.traffic.dram_bytes, cal.power),
                                          clock, cal.power)
        model[m] = np.broadcast_to(clock, m.sum()) / 1e6
    spin = ms.spin_clock_mhz()
    return ms, model, spin, ms.measured_s > LONG_S


def main(cal_path: str, gpu: str = "h100", kernel: str = "fa2_tc"):
    ms, model, spin, long_ = clocks(cal_path, gpu, kernel)
    c = ms.cols
    groups = defaultdict(list)
    for i in np.flatnonzero(long_):
        key = ((int(c["d"][i]), int(c["Br"][i]), int(c["Bc"][i]), int(c["threads"][i]) // 32) if kernel == "fa2_tc"
               else (int(c["d"][i]), "causal" if ms.causal[i] else "full"))
        groups[key].append(i)
    print(f"{kernel} on {gpu.upper()}, launches over {LONG_S * 1e3:.0f} ms: median clocks, MHz")
    for key in sorted(groups):
        ii = groups[key]
        print(f"  {str(key):22s} n={len(ii):3d}  model {np.median(model[ii]):6.0f}  spins {np.median(spin[ii]):6.0f}")
    print(f"correlation over {int(long_.sum())} launches: {np.corrcoef(model[long_], spin[long_])[0, 1]:.2f}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
