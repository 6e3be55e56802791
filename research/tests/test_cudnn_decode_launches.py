"""cuDNN's one-query decode split count against every launch the H200's records hold (research/data/h200/
sdpa_workload_calls.json and decode_cudnn_calls.json: research/scripts/sdpa_workload_calls.py)."""
from pathlib import Path

import numpy as np


def test_cudnn_one_query_split_count_is_the_recorded_launch_grid():
    """Every one-query cuDNN call the H200's records hold: the decode kernel's grid is (splits, Hkv row tiles, B),
    and the preset's split count is that grid's x (no split once the row tiles reach 0.8 of the SMs; twice the
    slots at d = 256)."""
    import json

    from perfmodel import api

    root = Path(__file__).resolve().parents[1] / "data" / "h200"
    seen = 0
    for name in ("sdpa_workload_calls.json", "decode_cudnn_calls.json"):
        for row in json.loads((root / name).read_text())["rows"]:
            if row.get("backend", "sdpa-cudnn") != "sdpa-cudnn" or row["Nq"] != 1 or "calls" not in row:
                continue
            grid = next(a["grid"] for a in row["calls"][0] if "fprop" in a["name"])
            r = api.predict(gpu="h200", kernel="sdpa-cudnn", B=row["B"], H=row["H"], Hkv=row["Hkv"], Nq=1,
                            Nk=row["Nk"], d=row["d"], dtype="bf16")
            t = r.prediction.tiles
            assert int(np.asarray(t.splits)) // 4 == grid[0], row
            assert grid[1] == row["Hkv"] * -(-(row["H"] // row["Hkv"]) // 16) and grid[2] == row["B"], row
            seen += 1
    assert seen >= 25
