"""The fill probe (research/scripts/probe_fill.py -> research/data/h100/probe/fill.json): cp.async fills beside
ldmatrix reads on the H100. What it recorded, held here so that a rerun that changes it shows: ldmatrix.x4 alone,
rotating over a 16 KB tile, delivers more shared-memory wavefronts per clock than the 1 the model prices (and than
the pipe-mix probe's fixed-address ldmatrix stream, pipes.json), and fills beside it cost more than nothing and less
than their wavefronts in full. Neither finding has entered the model (research/notes/known-gaps-log.md), and the first is not a
measurement of shared memory: twice the ldmatrix stream adds wavefronts at 7 to 97 a clock (below), so the probe
still loses loads."""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "research" / "data" / "h100" / "probe"


def _runs():
    d = json.loads((PROBE / "fill.json").read_text())
    assert d["provenance"]["gpu_name"] == "NVIDIA H100 80GB HBM3" and d["provenance"]["command"]
    return {(r["warps"], r["n_ldsm"], r["n_cp"]): r for r in d["runs"]}


def test_its_ldmatrix_streams_read_above_the_banks_rate_where_the_mix_probes_do_not():
    runs = _runs()
    rate = {w: runs[(w, 32, 0)]["ldsm_wavefronts_per_iter"] / runs[(w, 32, 0)]["sm_cycles_per_iter"]
            for w in (4, 8, 16)}
    assert rate[8] > 1.5 and rate[16] > 1.5, rate
    mix = json.loads((PROBE / "pipes.json").read_text())["mixes"]["ldsm32"]
    mix_rate = 4 * 32 * 16 / mix["sm_cycles_per_iter_16w"]
    assert mix_rate < 1.0 < rate[16]


def test_fills_beside_ldmatrix_cost_between_nothing_and_their_wavefronts():
    runs = _runs()
    for w in (8, 16):
        alone, both = runs[(w, 32, 0)], runs[(w, 32, 8)]
        extra = both["sm_cycles_per_iter"] - alone["sm_cycles_per_iter"]
        assert 0 < extra < both["store_wavefronts_per_iter"] * 1.3, (w, extra)


def test_the_probe_still_loses_loads():
    """Beside the same fills, doubling the ldmatrix stream (32 -> 64 per warp per iteration) adds 512, 1,024 and
    2,048 wavefronts in 71, 54 and 21 cycles at 4, 8 and 16 warps: 7 to 97 a clock, where 32 four-byte banks deliver
    1 (128 B). Some of the loads never reach shared memory, as in the probe's first version (research/notes/known-gaps-log.md):
    its ldmatrix rates are not shared memory's."""
    runs = _runs()
    for w in (4, 8, 16):
        lo, hi = runs[(w, 32, 8)], runs[(w, 64, 8)]
        extra = hi["ldsm_wavefronts_per_iter"] - lo["ldsm_wavefronts_per_iter"]
        assert extra / (hi["sm_cycles_per_iter"] - lo["sm_cycles_per_iter"]) > 4, w
