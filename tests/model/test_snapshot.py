"""Every committed fp32 row, both GPUs, both fp32 kernels, with the fitted path costs and with probe constants only,
predicts as the snapshot says (tests/data/snapshot_predictions.json), with the calibrations of the kernel-interface
refactor (tests/data/calibration-pre-refactor/: the same files, renamed to the new field names; the shipped ones have
since been refitted by the commands they record). The snapshot was first taken on the code before that refactor
(tests/data/make_snapshot_pre_refactor.py) and re-taken when the DRAM rule beyond L2 (perfmodel.model.memory)
changed the predictions on purpose.

Beside it, the GPUs nobody here has probed (tests/data/snapshot_unprobed.json): every kernel at its usual tiles on a
small grid, from the shipped spec, architecture and calibration files as they stand. Nothing measured holds these
predictions, so the snapshot is what makes a change to them visible (SDPA flash on the A100 once rose from 176 to 306
TFLOP/s, unnoticed, when a change aimed at the H100's join left other architectures with a generic one).

A change that moves predictions on purpose re-takes them, and states the movement in its commit message:

    PYTHONPATH=. python3 tests/model/test_snapshot.py          # rewrites the snapshot, prints the max relative change
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

ROOT = Path(__file__).resolve().parents[2]
SNAP_FILE = ROOT / "tests" / "data" / "snapshot_predictions.json"
SNAP = json.loads(SNAP_FILE.read_text())
# times: the model computes them in float32, whose last digits differ between numpy builds (up to ~1e-7 relative);
# a change to the model moves them by far more
RTOL = {"time_s": 1e-6, "flops": 1e-12, "smem_wavefronts": 1e-12, "dram_bytes": 1e-12}


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


UNPROBED_FILE = ROOT / "tests" / "data" / "snapshot_unprobed.json"
UNPROBED = json.loads(UNPROBED_FILE.read_text())
UNPROBED_GRID = dict(B=2, H=16, N=[512, 4096], d=[64, 128])


def unprobed(key: str):
    """Predicted seconds of ``key`` ("GPU|kernel|dtype|causal") over UNPROBED_GRID at the kernel's usual tiles (inf
    where a tile does not fit), or the one-line error the kernel gives on that GPU."""
    from perfmodel import api
    from perfmodel.errors import InputError

    g, kernel, dtype, causal = key.split("|")
    try:
        r = api.sweep(gpu=g, kernel=kernel, dtype=dtype, causal=causal == "causal", **UNPROBED_GRID)
    except InputError as e:
        return str(e)
    return [float(x) for x in np.asarray(r.time_s, float).ravel()]


def unprobed_keys():
    keys = []
    for g in ("a100-80gb", "a100-40gb", "rtx3090", "gtx1080", "h100-pcie", "rtx4090", "l40s", "l4"):
        keys += [f"{g}|{k}|fp32|plain" for k in ("fa1", "fa2")]
        keys += [f"{g}|{k}|fp16|{c}" for k in ("fa2_tc", "sdpa-flash", "sdpa-cudnn") for c in ("plain", "causal")]
    return keys


@pytest.mark.parametrize("key", unprobed_keys())
def test_unprobed_gpus_predict_as_before(key):
    got, want = unprobed(key), UNPROBED[key]
    if isinstance(want, str):
        assert got == want
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL["time_s"])


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
    new = {}
    for key in unprobed_keys():
        new[key] = got = unprobed(key)
        old = UNPROBED.get(key)
        if isinstance(got, str) or isinstance(old, (str, type(None))):
            print(key, "error" if isinstance(got, str) else "", "(new)" if old is None else "")
        else:
            a, b = np.asarray(got), np.asarray(old)
            f = np.isfinite(a) & np.isfinite(b)
            fits = int(np.sum(np.isfinite(a) != np.isfinite(b)))
            print(key, f"time_s={float(np.max(np.abs(a[f] / b[f] - 1))) if f.any() else 0:.3g}",
                  f"({fits} configurations now fit or no longer do)" if fits else "")
    UNPROBED_FILE.write_text(json.dumps(new, indent=0))


if __name__ == "__main__":
    regenerate()
