"""The kernel-interface refactor changed no prediction: every committed row, both GPUs, both fp32 kernels, with the
fitted path costs and with probe constants only, predicts as the snapshot taken before it
(tests/data/snapshot_predictions.json, written by tests/data/make_snapshot_pre_refactor.py on the old code), with
the calibrations of that time (tests/data/calibration-pre-refactor/: the same files, renamed to the new field
names; the shipped ones have since been refitted by the commands they record)."""

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
SNAP = json.loads((ROOT / "tests" / "data" / "snapshot_predictions.json").read_text())


@pytest.mark.parametrize("key", sorted(SNAP))
def test_every_committed_row_predicts_as_before(key):
    path, which = key.split("|")
    (ms,) = dataset.load([ROOT / path])
    spec = gpu.match_device_name(ms.gpu_name)
    cal = calibration.resolve(spec, ROOT / "tests" / "data" / "calibration-pre-refactor" / f"{spec.key}.yaml",
                              use_fits=which == "fitted")
    pred, _ = predict_set(ms, spec, cal)
    np.testing.assert_allclose(pred, SNAP[key]["time_s"], rtol=1e-9)
    k = get(ms.kernel)
    p = engine.evaluate(spec, k, ms.shape(), k.Tiles.from_columns(ms.tile_columns()), cal, regs=ms.regs())
    np.testing.assert_allclose(np.broadcast_to(p.counts.flops, len(ms)), SNAP[key]["flops"], rtol=1e-12)
    np.testing.assert_allclose(np.broadcast_to(p.counts.smem_wavefronts, len(ms)), SNAP[key]["smem_wavefronts"],
                               rtol=1e-12)
    np.testing.assert_allclose(np.broadcast_to(p.traffic.dram_bytes, len(ms)), SNAP[key]["dram_bytes"], rtol=1e-12)
