"""What Hopper's warpgroup MMAs reach on this GPU (issue 11: "on Hopper also what wgmma reaches"), as JSON.

    python3 research/scripts/probe_wgmma.py OUT.json

Builds research/csrc/probe_wgmma.cu for sm_90a (its own extension module: wgmma needs the arch-specific target) and runs,
on random fp16 data, one block per SM of 1-3 warpgroups issuing m64nNk16 wgmmas (N = 128, 256; A from shared memory
or registers), and mma.sync m16n8k16 for comparison. Each run is timed two ways: clock64 cycles inside the kernel
(the per-clock rate) and CUDA events on the host (the rate per second, at whatever clock the GPU ran). Their
ratio is the SM clock the run saw: a tensor-saturated SM draws the most power, and the clock drops under the
power limit. A sustained part repeats the best configuration for a few seconds while nvidia-smi samples the SM
clock and power. Nothing here changes clocks or power limits.
"""
import time

import numpy as np

from perfmodel.errors import InputError
from perfmodel.measure import build
from common import Sampler
import common

TARGET_S = 0.15           # each timed launch lasts about this long
FLOPS_PER_K_BLOCK = 4 * 64 * 16 * 2      # four m64nNk16 wgmmas, times N


def load_module():
    """(torch, toolchain facts, the sm_90a module); an sm_90 GPU only."""
    torch = build.require_torch()
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        raise InputError(f"the wgmma probe needs an sm_90 GPU (this one is sm_{major}{minor})")
    return common.load_cuda("probe_wgmma.cu", "wgmma", deps=("probe_mma.cuh",), arch="9.0a")


def timed(torch, launch, cycles):
    """(max block cycles, event seconds) of one launch."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    launch()
    e.record()
    torch.cuda.synchronize()
    return float(cycles.max().item()), s.elapsed_time(e) * 1e-3


def run_one(torch, launch_with, flops_per_iter, cycles, log, label):
    """Calibrate the iteration count to TARGET_S, then time: per-clock and per-second rates and the clock seen."""
    c, t = timed(torch, lambda: launch_with(200), cycles)
    iters = int(np.clip(200 * TARGET_S / max(t, 1e-6), 200, 2_000_000))
    c, t = timed(torch, lambda: launch_with(iters), cycles)
    sm = cycles.numel()
    out = {"iters": iters, "cycles": c, "seconds": t,
           "flop_per_clk_per_sm": flops_per_iter * iters / c,
           "tflops": flops_per_iter * iters * sm / t / 1e12,
           "clock_mhz_seen": c / t / 1e6}
    log(f"{label:28s} {out['flop_per_clk_per_sm']:7.0f} FLOP/clk/SM  {out['tflops']:6.1f} TFLOP/s  "
        f"clock {out['clock_mhz_seen']:6.0f} MHz")
    return out


def main(path):
    torch, tool, ext = load_module()
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    g = torch.Generator(device="cuda").manual_seed(0)
    src = torch.randn((sm * (64 * 128 + 256 * 128)) // 2 + sm * 16 * 32 * 12, device="cuda", dtype=torch.float16,
                      generator=g)
    cycles = torch.zeros(sm, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, device="cuda")
    peak = 4096          # dense fp16 FLOP/clk/SM of GH100 (whitepaper: 1024 FMA/clk per tensor core, 4 per SM)
    out = {"peak_flop_per_clk_per_sm": peak, "runs": {}}
    # label -> (launch with an iteration count, FLOPs per iteration of the whole block)
    configs = {}
    for n in (128, 256):
        for rs in (False, True):
            for wg in (1, 2, 3):
                configs[f"wgmma m64n{n}k16 {'RS' if rs else 'SS'} {wg} WG"] = (
                    lambda it, n=n, rs=rs, wg=wg: ext.probe_wgmma(src, cycles, sink, sm, wg, it, n, rs),
                    wg * FLOPS_PER_K_BLOCK * n)
    for w in (4, 8, 16):
        configs[f"mma.sync m16n8k16 {w} warps"] = (
            lambda it, w=w: ext.probe_mma_random(src, cycles, sink, sm, w, it), w * 8 * 4096)
    for label, (launch_with, per_iter) in configs.items():
        out["runs"][label] = run_one(torch, launch_with, per_iter, cycles, print, label)
    # sustained: the best wgmma and mma.sync configurations back to back for ~3 s each, clock and power sampled
    best = max((k for k in out["runs"] if k.startswith("wgmma")), key=lambda k: out["runs"][k]["tflops"])
    best_mma = max((k for k in out["runs"] if k.startswith("mma")), key=lambda k: out["runs"][k]["tflops"])
    out["sustained"] = {}
    for label in (best, best_mma):
        r = out["runs"][label]
        launch_with, per_iter = configs[label]
        reps = []
        with Sampler() as smi:
            t_end = time.time() + 3.0
            while time.time() < t_end:
                c, t = timed(torch, lambda: launch_with(r["iters"]), cycles)
                reps.append((c, t))
        c, t = np.array(reps).T
        out["sustained"][label] = {
            "launches": len(reps), "seconds_each": float(np.median(t)),
            "tflops_first": float(per_iter * r["iters"] * sm / t[0] / 1e12),
            "tflops_last": float(per_iter * r["iters"] * sm / t[-1] / 1e12),
            "tflops_median": float(per_iter * r["iters"] * sm / np.median(t) / 1e12),
            "clock_mhz_seen_median": float(np.median(c / t) / 1e6), "nvidia_smi": smi.summary()}
        print(label, "sustained:", out["sustained"][label])
    common.write_record(path, torch, tool, out, indent=1,
                       data="torch.randn fp16 (seed 0), a different slice per block")


if __name__ == "__main__":
    common.run_script(main)
