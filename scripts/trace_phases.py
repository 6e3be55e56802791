"""Where a fa2_tc block's KV loop spends its cycles, and how co-resident blocks split their SM, from the phase traces
(analysis only; nothing is fitted).

    python3 scripts/trace_phases.py

Reads examples/measurements/h100/probe/fa2_tc_trace_phase.json (`scripts/gpu_run.sh trace-tc-phase`): every
instance at one to the measured build's blocks per SM, in grids of exactly one and two rounds, each block's warp 0
recording the SM cycles of each phase of its KV loop, summed over its tiles (fa2_tc.cu, "Trace builds only"):
waiting for K, QK^T with the softmax (S), waiting for V, PV. The launches run back to back without an L2 flush
(their K/V stay in L2), unlike the timed grid's. Prints, per instance, a lone block's cycles a tile by phase; then,
per launch of one round of k blocks a SM, a tile's cycles for the blocks of each place on their SM (the first
started, the second, ...), the youngest's over the oldest's, and the blocks' throughput over a lone block's.
Run from the repository root.
"""
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "measurements" / "h100" / "probe" / "fa2_tc_trace_phase.json"
PHASES = ("wait_k_cycles", "s_cycles", "wait_v_cycles", "pv_cycles")
SMS = 132                                  # the traced H100's SMs (the record's launches fill them exactly)


def key(r):
    """A traced launch's instance, (d, Br, Bc, warps) as in fa2_tc.INSTANCES."""
    return (r["d"], r["Br"], r["Bc"], r["warps"])


def one_round(run: dict) -> dict:
    """A launch of exactly one round: per place on an SM (by start), its blocks' mean cycles a KV tile, by phase."""
    rep = run["reps"][-1]
    sm, start = np.asarray(rep["smid"]), np.asarray(rep["start_ns"], dtype=float)
    place = np.zeros(len(sm), dtype=int)
    for s in np.unique(sm):
        mine = np.flatnonzero(sm == s)
        place[mine[np.argsort(start[mine])]] = np.arange(len(mine))
    tiles = -(-run["N"] // run["Bc"])
    per = {p: np.asarray(rep[p], dtype=float) / tiles for p in PHASES}
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


if __name__ == "__main__":
    main()
