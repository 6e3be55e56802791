"""Analysis only: what the tensor-core predictions would score if each launch ran at the SM clock recorded with its
row (research/notes/known-gaps-log.md, power-limited clocks). Nothing in the model reads these clocks.

    python3 research/scripts/clock_oracle.py [h100|h200] [COLUMN]

COLUMN: the recorded clock to scale by (default sm_clock_mhz_after, nvidia-smi's reading after the row's runs;
spin_clock_mhz_after is the bench's own). Each prediction is divided by min(clock, tensor clock) / tensor clock.
fa2_tc is scored on its held-out rows on the H100 (every row on the H200, whose fit is carried), as validate does.
"""
import sys
from pathlib import Path

import numpy as np

from perfmodel.evaluation import dataset, validate
from perfmodel.hw import gpu as gpu_mod

ROOT = Path(__file__).resolve().parents[2]


def main(gpu="h100", column="sm_clock_mhz_after"):
    for kernel in ("fa2_tc", "sdpa-flash", "sdpa-cudnn"):
        ms = dataset.load([str(ROOT / "examples" / "measurements" / gpu / f"{kernel}.csv")])[0]
        ms = ms.select(validate.split_mask(ms, "test" if kernel == "fa2_tc" and gpu == "h100" else "all"))
        ev = validate.evaluate([ms], split="all")[0]          # the rows kept above, predicted as validate does
        tensor_mhz = gpu_mod.resolve(ev.gpu).tensor_clock_hz / 1e6
        clock = np.array([float(r.get(column) or "nan") for r in ms.rows])
        scale = np.where(np.isfinite(clock), np.minimum(clock, tensor_mhz) / tensor_mhz, 1.0)
        for name, p in (("as modelled", ev.predicted_s), (f"at {column}", ev.predicted_s / scale)):
            e = p / ev.measured_s - 1
            line = f"{kernel:11s} {name:28s} MAPE {np.abs(e).mean() * 100:5.2f}%  bias {e.mean() * 100:+5.1f}%"
            if kernel == "fa2_tc":
                line += f"  Spearman over tiles {validate.grouped_spearman(ev.problems, p, ev.measured_s)[0]:.3f}"
            print(line)


if __name__ == "__main__":
    main(*sys.argv[1:3])
