"""Where a fa2_tc block's KV loop spends its cycles, and how co-resident blocks split their SM, from the phase traces
(analysis only; nothing is fitted).

    python3 research/scripts/trace_phases.py

Reads research/data/h100/probe/fa2_tc_trace_phase.json (`research/scripts/gpu_run.sh trace-tc-phase`): every
instance at one to the measured build's blocks per SM, in grids of exactly one and two rounds, each block's warp 0
recording the SM cycles of each phase of its KV loop, summed over its tiles (fa2_tc.cu, "Trace builds only"):
waiting for K, QK^T with the softmax (S), waiting for V, PV. The launches run back to back without an L2 flush
(their K/V stay in L2), unlike the timed grid's. Prints, per instance, a lone block's cycles a tile by phase; then,
per launch of one round of k blocks a SM, a tile's cycles for the blocks of each place on their SM (the first
started, the second, ...), the youngest's over the oldest's, and the blocks' throughput over a lone block's.
fa2_tc_trace_phase_cold.json (`trace-tc-phase-cold`) holds the same launches, each after an L2 flush, as the timed
grid's are: per instance and blocks a SM, the one-round launch's span, what the second round adds, the model's
prediction of both and a tile's load waits, flushed and not. Run from the repository root.
"""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel.hw import calibration, gpu  # noqa: E402
from perfmodel.kernels.fa2_tc import PaddedFA2TC  # noqa: E402
from perfmodel.model import engine  # noqa: E402
from perfmodel.shape import AttentionShape  # noqa: E402
from trace_fairness import SMS, key  # noqa: E402  (the traced GPU's SMs; a launch's instance)
TRACE = ROOT / "research" / "data" / "h100" / "probe" / "fa2_tc_trace_phase.json"
COLD = TRACE.with_name("fa2_tc_trace_phase_cold.json")
PHASES = ("wait_k_cycles", "s_cycles", "wait_v_cycles", "pv_cycles")


def per_tile(run: dict) -> dict:
    """Phase -> each block's warp 0 cycles in it a KV tile (the launch's last record)."""
    rep, tiles = run["reps"][-1], -(-run["N"] // run["Bc"])
    return {p: np.asarray(rep[p], dtype=float) / tiles for p in PHASES}


def one_round(run: dict) -> dict:
    """A launch of exactly one round: per place on an SM (by start), its blocks' mean cycles a KV tile, by phase."""
    rep = run["reps"][-1]
    sm, start = np.asarray(rep["smid"]), np.asarray(rep["start_ns"], dtype=float)
    place = np.zeros(len(sm), dtype=int)
    for s in np.unique(sm):
        mine = np.flatnonzero(sm == s)
        place[mine[np.argsort(start[mine])]] = np.arange(len(mine))
    per = per_tile(run)
    return {p: [float(per[p][place == k].mean()) for k in range(run["blocks_per_sm"])] for p in PHASES}


def compute() -> dict:
    """(instance, blocks a SM) -> one_round of that launch, with 'tile' (the phases' sum) per place."""
    out = {}
    for r in json.loads(TRACE.read_text())["runs"]:
        if len(r["reps"][-1]["smid"]) == SMS * r["blocks_per_sm"]:
            ph = one_round(r)
            ph["tile"] = [sum(ph[p][k] for p in PHASES) for k in range(r["blocks_per_sm"])]
            out[(key(r), r["blocks_per_sm"])] = ph
    return out


def span_us(run: dict) -> float:
    """A traced launch's span: its first block's start to its last block's end."""
    rep = run["reps"][-1]
    return (max(rep["end_ns"]) - min(rep["start_ns"])) / 1e3


def waits_per_tile(run: dict) -> float:
    """Warp 0's cycles waiting for K and V a KV tile, the mean over the launch's blocks."""
    per = per_tile(run)
    return float(np.mean(per["wait_k_cycles"] + per["wait_v_cycles"]))


def model_us(run: dict, spec, cal) -> float:
    """The model's prediction (us) of a traced launch, at its blocks a SM: the measured build's registers (fa2_tc's)
    with unused shared memory enough to hold it there, as the trace build was held."""
    extra = 0
    while True:
        k = PaddedFA2TC(extra)
        p = engine.evaluate(spec, k, AttentionShape(run["B"], run["H"], run["N"], run["d"], "fp16", False),
                            k.Tiles(Br=run["Br"], Bc=run["Bc"], warps=run["warps"]), cal)
        if int(np.asarray(p.blocks_per_sm)) <= run["blocks_per_sm"]:
            return float(p.time_s) * 1e6
        extra += 1024


def cold_vs_model() -> dict:
    """(instance, blocks a SM) -> the flushed launches of one and two rounds against the model: 'one' and 'two'
    (spans, us), 'round' (what the second round adds), the model's 'model_one', 'model_two', 'model_round', and a
    tile's load waits of the one-round launch flushed ('waits_cold') and not ('waits_warm', fa2_tc_trace_phase)."""
    spec = gpu.resolve("h100")
    cal = calibration.resolve(spec)
    warm = {(key(r), r["blocks_per_sm"], r["H"]): r for r in json.loads(TRACE.read_text())["runs"]}
    out = {}
    for r in json.loads(COLD.read_text())["runs"]:
        assert r.get("l2_flushed")
        rounds = len(r["reps"][-1]["smid"]) // (SMS * r["blocks_per_sm"])
        o = out.setdefault((key(r), r["blocks_per_sm"]), {})
        name = {1: "one", 2: "two"}[rounds]
        o[name], o["model_" + name] = span_us(r), model_us(r, spec, cal)
        if rounds == 1:
            o["waits_cold"] = waits_per_tile(r)
            o["waits_warm"] = waits_per_tile(warm[(key(r), r["blocks_per_sm"], r["H"])])
    for o in out.values():
        o["round"], o["model_round"] = o["two"] - o["one"], o["model_two"] - o["model_one"]
    return out


def main():
    runs = compute()
    print("a lone block (one a SM), cycles a KV tile: wait K, S (QK^T and softmax), wait V, PV; S / PV")
    for (k, n), ph in sorted(runs.items()):
        if n == 1:
            w = [ph[p][0] for p in PHASES]
            print(f"  d {k[0]:3d} {k[1]}x{k[2]}/{k[3]}w: " + " ".join(f"{x:6.0f}" for x in w)
                  + f"  waits {100 * (w[0] + w[2]) / sum(w):4.1f}%, S / PV {w[1] / w[3]:.2f}")
    print("k blocks a SM, one round: a tile's cycles by place (S + PV of each), youngest / oldest, throughput / lone")
    for (k, n), ph in sorted(runs.items()):
        if n > 1 and (k, 1) in runs:
            places = " ".join(f"{t:5.0f} ({s:.0f}+{v:.0f})" for t, s, v in zip(ph["tile"], ph["s_cycles"],
                                                                              ph["pv_cycles"]))
            gain = n * runs[(k, 1)]["tile"][0] / np.mean(ph["tile"])
            print(f"  d {k[0]:3d} {k[1]}x{k[2]}/{k[3]}w k {n}: {places}; {ph['tile'][-1] / ph['tile'][0]:.3f}, "
                  f"{gain:.2f}")

    print("flushed as the timed grid: one round, the second round, the model's of each (us); a tile's load waits "
          "(cycles) flushed and not")
    for (k, n), o in sorted(cold_vs_model().items()):
        print(f"  d {k[0]:3d} {k[1]}x{k[2]}/{k[3]}w k {n}: one {o['one']:6.1f} (model {o['model_one']:6.1f}), second "
              f"{o['round']:6.1f} (model {o['model_round']:6.1f}), two {o['two']:6.1f} (model {o['model_two']:6.1f}); "
              f"waits {o['waits_cold']:4.0f} / {o['waits_warm']:3.0f}")


if __name__ == "__main__":
    main()
