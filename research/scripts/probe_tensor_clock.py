"""The SM clock tensor-core loads run at when power does not limit them (sm_90), as JSON.

    python3 research/scripts/probe_tensor_clock.py OUT.json

The model converts a tensor-core launch's cycles to seconds at the GPU's tensor clock (``clock_tensor_mhz``,
1830 MHz on the H100 SXM), which the power probe read under mma.sync loads that stayed far below the power limit.
Whether warpgroup MMAs (cuDNN's kernel issues them) run at that clock too had only been inferred, from the wgmma
probe's full-GPU runs, which the power limit holds far below it. Here the wgmma probe's kernels run on a few SMs,
so the board stays far from its limit: two warpgroups of m64n128k16 (A from shared memory, as cuDNN's Q K^T) and,
for comparison, mma.sync m16n8k16 (8 warps) and a sleeping block (``torch.cuda._sleep``, no tensor work). Each
launch lasts about 2 ms after 20 ms idle; the clock it saw is its slowest block's clock64 cycles over its event
time (a launch's few microseconds of overhead: under 0.3%). nvidia-smi samples the SM clock and board power
meanwhile. Nothing here changes clocks or power limits.
"""
import time

import numpy as np
from common import Sampler
from probe_wgmma import load_module, timed
import common

BLOCKS = (1, 8, 33, 66, 132)
LAUNCH_S = 2e-3
REPS = 9
SLEEP_CYCLES = 4_000_000      # torch.cuda._sleep: about 2 ms


def clock_of(torch, launch_with, cycles, blocks, iters0):
    """Calibrate the iteration count to LAUNCH_S; then REPS launches, each after 20 ms idle: the clocks they saw
    (MHz), their event times (s) and nvidia-smi's samples meanwhile."""
    launch_with(iters0)
    torch.cuda.synchronize()
    _, t = timed(torch, lambda: launch_with(iters0), cycles)
    iters = int(max(iters0 * LAUNCH_S / max(t, 1e-7), 1))
    seen, secs = [], []
    with Sampler() as smi:
        for _ in range(REPS):
            time.sleep(0.02)
            cycles.zero_()
            c, t = timed(torch, lambda: launch_with(iters), cycles[:blocks])
            seen.append(c / t / 1e6)
            secs.append(t)
    return {"iters": iters, "clock_mhz_seen": seen, "clock_mhz_seen_median": float(np.median(seen)),
            "seconds_median": float(np.median(secs)), "nvidia_smi": smi.summary(skip=0)}


def main(path):
    torch, tool, ext = load_module()
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    g = torch.Generator(device="cuda").manual_seed(0)
    src = torch.randn((sm * (64 * 128 + 256 * 128)) // 2 + sm * 16 * 32 * 12, device="cuda", dtype=torch.float16,
                      generator=g)
    cycles = torch.zeros(sm, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, device="cuda")
    out = {"launch_s": LAUNCH_S, "reps": REPS, "runs": {}}
    loads = {
        "wgmma m64n128k16 SS 2 WG": lambda b: (lambda it: ext.probe_wgmma(src, cycles, sink, b, 2, it, 128, False),
                                               2000),
        "mma.sync m16n8k16 8 warps": lambda b: (lambda it: ext.probe_mma_random(src, cycles, sink, b, 8, it), 2000),
    }
    for blocks in BLOCKS:
        if blocks > sm:
            continue
        for label, make in loads.items():
            launch_with, iters0 = make(blocks)
            r = clock_of(torch, launch_with, cycles, blocks, iters0)
            out["runs"][f"{label}, {blocks} blocks"] = {"blocks": blocks, **r}
            print(f"{label:28s} {blocks:4d} blocks: clock {r['clock_mhz_seen_median']:6.0f} MHz "
                  f"(nvidia-smi {r['nvidia_smi']['sm_clock_mhz_median']:.0f} MHz, "
                  f"{r['nvidia_smi']['power_w_median']:.0f} W)", flush=True)
    # no tensor work: one sleeping block, its known cycles over its event time
    seen = []
    for _ in range(REPS):
        time.sleep(0.02)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(SLEEP_CYCLES)
        e.record()
        torch.cuda.synchronize()
        seen.append(SLEEP_CYCLES / (s.elapsed_time(e) * 1e-3) / 1e6)
    out["runs"]["sleep, 1 block"] = {"blocks": 1, "clock_mhz_seen": seen,
                                     "clock_mhz_seen_median": float(np.median(seen))}
    print(f"sleep, 1 block: clock {np.median(seen):6.0f} MHz")
    common.write_record(path, torch, tool, out, indent=1,
                       data="torch.randn fp16 (seed 0), a different slice per block")


if __name__ == "__main__":
    common.run_script(main)
