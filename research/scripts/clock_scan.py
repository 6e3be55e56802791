"""How firmly fa2_tc's timings pin the tensor clock: for each assumed clock, refit fa2_tc's path costs on the H100's
training split and score the held-out rows (MAPE, Spearman over tiles) and the H200's every row. An analysis, not
a calibration: the model takes the datasheet's tensor clock (gpus/*.yaml clock_tensor_mhz), which the power probe
confirms, whatever this prints (research/notes/tensorcore.md, the tensor clock). About a minute a clock.

    python3 research/scripts/clock_scan.py [MHZ ...]      (default: 1980 1900 1830 1780 1700)
"""
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel.evaluation import dataset, fit, validate  # noqa: E402
from perfmodel.hw import calibration, gpu  # noqa: E402

DATA = ROOT / "examples" / "measurements"


def score(spec, cal, ms, held_out: bool):
    ms = ms.select(validate.split_mask(ms, "test" if held_out else "all"))
    pred = validate.predict_set(ms, spec, cal)[0]
    ape = np.abs(pred / ms.measured_s - 1) * 100
    groups = list(zip(*(ms.cols[k] for k in ("B", "H", "N", "d")), ms.dtype, ms.causal))
    rho = validate.grouped_spearman(groups, pred, ms.measured_s)[0]
    return f"MAPE {ape.mean():.2f}%  worst {ape.max():.1f}%  Spearman {rho:.3f}"


def main(clocks):
    (h100,) = dataset.load([DATA / "h100" / "fa2_tc.csv"])
    (h200,) = dataset.load([DATA / "h200" / "fa2_tc.csv"])
    for mhz in clocks:
        s100 = dataclasses.replace(gpu.resolve("h100"), clock_tensor_mhz=float(mhz))
        s200 = dataclasses.replace(gpu.resolve("h200"), clock_tensor_mhz=float(mhz))
        c100 = calibration.resolve(s100)
        entry = fit.fit_path(s100, c100, h100)
        with_fit = lambda cal: dataclasses.replace(cal, path_fits={**cal.path_fits, "fa2_tc": entry})
        train = entry["training"]["mape_on_training_rows"]
        print(f"{mhz:6.0f} MHz: training {train:.2f}% | H100 held out {score(s100, with_fit(c100), h100, True)} | "
              f"H200 {score(s200, with_fit(calibration.resolve(s200)), h200, False)}", flush=True)


if __name__ == "__main__":
    main([float(x) for x in sys.argv[1:]] or [1980, 1900, 1830, 1780, 1700])
