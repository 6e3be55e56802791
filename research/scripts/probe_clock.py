"""Why the bench's spin clock reads above the GPU's maximum (a quarter of the clocked H100 fa2_tc rows read
1990-2075 MHz against 1980; research/notes/known-gaps-log.md). The bench times a spin of known SM cycles between two events and takes
cycles / (event time - gap), the gap measured once from spins of n and 2n cycles. probe_csrc/probe.cu probe_clock_kernel
spins the same way and also reads the GPU's nanosecond timer (%globaltimer) at both ends, so each spin gets the event
estimate and an in-kernel one, which no event pair, launch or gap enters. Spins are taken as the bench takes them
(after the L2 flush, before and after the timed launch) with no launch between, a light one and a heavy one.

Usage: python3 research/scripts/probe_clock.py OUT.json"""
import time

import numpy as np

from perfmodel.kernels import get
from perfmodel.measure import bench, build
from perfmodel.shape import AttentionShape
import common

SPIN_CYCLES = 600_000                 # the bench's head start: 300 us at 2 GHz
# (label, (B, H, N, d, Br, Bc, warps)): the launches the spins sit beside; heavy: a full grid of the d = 128 class
# whose rows read highest (2024 MHz median)
BESIDE = [("none", None), ("light", (1, 1, 1024, 64, 64, 64, 4)), ("heavy", (2, 16, 8192, 128, 128, 128, 8))]
ROUNDS = 40


def clock_runs(torch, ext, bencher):
    out = torch.zeros(2 * (2 * ROUNDS + 40), dtype=torch.int64, device="cuda")

    def spin(slot, cycles=SPIN_CYCLES):
        return bench.events_around(torch, lambda: ext.probe_clock(out, cycles, slot))

    # the bench's gap (bench.gap_ms), taken with this kernel from spins of n and 2n cycles back to back
    pairs = [(spin(2 * i, SPIN_CYCLES // 2), spin(2 * i + 1)) for i in range(5)]
    torch.cuda.synchronize()
    gap = bench.gap_ms(pairs)
    records = []
    for label, cfg in BESIDE:
        fn = None
        if cfg is not None:
            B, H, N, d, Br, Bc, W = cfg
            k = get("fa2_tc")
            runner = k.runner(torch, ext, AttentionShape(B, H, N, d, "fp16", False), k.Tiles(Br, Bc, W))
            Q, K, V = runner.inputs(1)
            runner.setup()
            fn = lambda: runner.timed_launch(Q, K, V)          # noqa: E731
        torch.cuda.synchronize()
        time.sleep(0.5)
        spins = []
        for r in range(ROUNDS):
            bencher.flush_l2()
            head = spin(2 * r)
            if fn is not None:
                fn()
            tail = spin(2 * r + 1)
            spins.append((head, tail))
        torch.cuda.synchronize()
        o = out.cpu().numpy().reshape(-1, 2)
        for r, (head, tail) in enumerate(spins):
            for side, (a, b), slot in (("before", head, 2 * r), ("after", tail, 2 * r + 1)):
                cyc, ns = int(o[slot, 0]), int(o[slot, 1])
                t_ms = a.elapsed_time(b)
                records.append({"beside": label, "round": r, "side": side, "cycles": cyc, "kernel_ns": ns,
                                "event_ms": t_ms, "kernel_mhz": cyc / ns * 1e3,
                                "event_mhz": cyc / ((t_ms - gap) * 1e3) if t_ms > gap else None})
        med = lambda key, side: float(np.median([x[key] for x in records           # noqa: E731
                                                 if x["beside"] == label and x["side"] == side and x[key]]))
        print(label, {s: (round(med("kernel_mhz", s), 1), round(med("event_mhz", s), 1)) for s in ("before", "after")},
              flush=True)
    return {"gap_ms": gap, "spin_cycles": SPIN_CYCLES, "spins": records}


def main(out_path):
    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    ext = build.load_probe()
    record = clock_runs(torch, ext, bench.Bencher(torch))
    common.write_record(out_path, torch, tool, record, indent=None)


if __name__ == "__main__":
    common.run_script(main)
