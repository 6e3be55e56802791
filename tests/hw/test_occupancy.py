import csv
from pathlib import Path

import numpy as np

from perfmodel.hw import gpu
from perfmodel.hw.occupancy import blocks_per_sm, waves

H100 = gpu.resolve("h100")
DATA = Path(__file__).resolve().parents[2] / "examples" / "measurements" / "h100"


def test_reserve_and_granularity():
    # 12 KB blocks: 233,472 // (12,288 + 1,024) = 17 on an H100, not 19 (the 1 KB reserve counts)
    assert int(blocks_per_sm(H100, 32, 16, 12288)) == 17
    # block limit, warp limit, register limit
    assert int(blocks_per_sm(H100, 32, 16, 0)) == 32
    assert int(blocks_per_sm(H100, 1024, 16, 0)) == 2
    assert int(blocks_per_sm(H100, 256, 255, 0)) == 1        # 255 regs -> 8192 per warp -> 8 warps / SM
    assert int(blocks_per_sm(H100, 32, 16, 232449)) == 0      # beyond the opt-in limit


def test_waves_formula():
    assert float(waves(H100, 16384, 16)) == 16384 / (16 * 132)


def test_occupancy_matches_cuda_for_every_measured_configuration():
    # cudaOccupancyMaxActiveBlocksPerMultiprocessor was recorded with every measured row
    for name in ("fa1", "fa2"):
        rows = list(csv.DictReader(open(DATA / f"{name}.csv")))
        T = np.array([int(r["threads"]) for r in rows])
        regs = np.array([int(r["regs_per_thread"]) for r in rows])
        smem = np.array([int(r["smem_bytes"]) for r in rows])
        cuda = np.array([int(r["cuda_blocks_per_sm"]) for r in rows])
        assert (blocks_per_sm(H100, T, regs, smem) == cuda).all()
