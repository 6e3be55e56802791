"""Long tensor-core launches run power-limited (README, Known gaps): while the d = 128 fa2_tc launches of
examples/grids/power-check.yaml were timed, nvidia-smi sampled the H100's SM clock and power every 50 ms
(examples/measurements/h100/power/). Held to that data."""
import csv
import datetime
from pathlib import Path

import numpy as np

POWER = Path(__file__).resolve().parents[1] / "examples" / "measurements" / "h100" / "power"


def _samples():
    out = []
    for line in open(POWER / "power-check.smi.csv"):
        t, clk, watts, limit, _temp = [x.strip() for x in line.split(",")]
        stamp = datetime.datetime.strptime(t, "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
        out.append((stamp.timestamp(), float(clk.split()[0]), float(watts.split()[0]), float(limit.split()[0])))
    return np.array(out)


def test_long_launches_run_at_the_power_limit_below_the_model_clock():
    s = _samples()
    rows = list(csv.DictReader(open(POWER / "power-check.csv")))
    assert len(rows) >= 20 and all(r["d"] == "128" and r["dtype"] == "fp16" for r in rows)
    first = min(datetime.datetime.fromisoformat(r["date"]).timestamp() for r in rows) - 5
    last = max(datetime.datetime.fromisoformat(r["date"]).timestamp() for r in rows)
    busy = s[(s[:, 0] >= first) & (s[:, 0] <= last) & (s[:, 2] > 600)]      # samples drawing over 600 W
    assert len(busy) > 300
    assert np.median(busy[:, 2]) > 0.98 * busy[0, 3]                           # at the 700 W limit
    assert np.median(busy[:, 1]) < 1850 and np.percentile(busy[:, 1], 90) < 1950  # below the 1980 MHz modelled
