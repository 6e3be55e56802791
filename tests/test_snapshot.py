"""Every committed fp32 row, both GPUs, both fp32 kernels, with the fitted path costs and with probe constants only,
predicts as the snapshot says (tests/data/snapshot_predictions.json), with the calibrations of the kernel-interface
refactor (tests/data/calibration-pre-refactor/: the same files, renamed to the new field names; the shipped ones have
since been refitted by the commands they record). The snapshot was first taken on the code before that refactor
(tests/data/make_snapshot_pre_refactor.py) and re-taken when the DRAM rule beyond L2 (perfmodel.model.memory)
changed the predictions on purpose.

A change that moves predictions on purpose re-takes it, and states the movement in its commit message:

    PYTHONPATH=. python3 tests/test_snapshot.py          # rewrites the snapshot, prints the max relative change
"""

import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.evaluation import dataset
from perfmodel.evaluation.validate import predict_set
from perfmodel.hw import calibration, gpu
from perfmodel.model import engine
from perfmodel.kernels import get

ROOT = Path(__file__).resolve().parent.parent
SNAP_FILE = ROOT / "tests" / "data" / "snapshot_predictions.json"
SNAP = json.loads(SNAP_FILE.read_text())
RTOL = {"time_s": 1e-9, "flops": 1e-12, "smem_wavefronts": 1e-12, "dram_bytes": 1e-12}


def predictions(key: str) -> dict:
    """The snapshot's fields for ``key`` ("CSV path|fitted" or "CSV path|probe"), predicted by the current code."""
    path, which = key.split("|")
    (ms,) = dataset.load([ROOT / path])
    spec = gpu.match_device_name(ms.gpu_name)
    cal = calibration.resolve(spec, ROOT / "tests" / "data" / "calibration-pre-refactor" / f"{spec.key}.yaml",
                              use_fits=which == "fitted")
    pred, _ = predict_set(ms, spec, cal)
    k = get(ms.kernel)
    p = engine.evaluate(spec, k, ms.shape(), k.Tiles.from_columns(ms.tile_columns()), cal, regs=ms.regs())
    whole = lambda a: np.broadcast_to(a, len(ms)).astype(float)
    return {"time_s": np.asarray(pred, float), "dram_bytes": whole(p.traffic.dram_bytes),
            "smem_wavefronts": whole(p.counts.smem_wavefronts), "flops": whole(p.counts.flops)}


@pytest.mark.parametrize("key", sorted(SNAP))
def test_every_committed_row_predicts_as_before(key):
    got = predictions(key)
    for field, rtol in RTOL.items():
        np.testing.assert_allclose(got[field], SNAP[key][field], rtol=rtol, err_msg=field)


def regenerate() -> None:
    """Re-take the snapshot with the current code (same keys); print each key's max relative change per field."""
    out = {}
    for key in SNAP:
        got = predictions(key)
        out[key] = {f: got[f].tolist() for f in SNAP[key]}
        moved = {f: float(np.max(np.abs(got[f] / np.asarray(SNAP[key][f]) - 1))) for f in SNAP[key]}
        print(key, " ".join(f"{f}={v:.3g}" for f, v in moved.items()))
    SNAP_FILE.write_text(json.dumps(out))


if __name__ == "__main__":
    regenerate()
