"""How long a warpgroup waits on a group of warpgroup MMAs it has just issued (sm_90), as JSON.

    python3 research/scripts/probe_wgmma_chain.py OUT.json

A FlashAttention-3-class kernel (cuDNN's sm_90 attention kernel among them: sdpa-cudnn's preset) issues each of a
KV step's two GEMMs as one group of dependent wgmmas and waits for the group before the softmax, or the next step,
reads its result. What that wait costs beyond the pipe time of the group's MMAs is what such a step's chain adds
per GEMM. Built from research/csrc/probe_wgmma.cu (the wgmma probe's module, sm_90a), one block per SM of 1 or 2 warpgroups
issues, per iteration, k = 1, 2, 4 or 8 dependent m64n128k16 wgmmas (A from shared memory, SS, as Q K^T; or from
registers, RS, as P V) into the same accumulators, commits them and waits for all (wait_group 0). Cycles per
iteration (clock64, the block's slowest warp) against k: the slope is the pipe time of one wgmma, the intercept the
wait a group adds beyond it. Nothing here changes clocks or power limits.
"""
import numpy as np
from probe_wgmma import load_module, timed
import common

KSTEPS = (1, 2, 4, 8)
ITERS = 20000
FLOPS_WGMMA = 64 * 128 * 16 * 2          # one m64n128k16


def main(path):
    torch, tool, ext = load_module()
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    g = torch.Generator(device="cuda").manual_seed(0)
    src = torch.randn(sm * (64 * 128 + 128 * 128) // 2, device="cuda", dtype=torch.float16, generator=g)
    cycles = torch.zeros(sm, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, device="cuda")
    out = {"iters": ITERS, "runs": {}, "fits": {}}
    for rs in (False, True):
        for wg in (1, 2):
            name, per = f"{'RS' if rs else 'SS'} {wg} WG", []
            for k in KSTEPS:
                launch = lambda: ext.probe_wgmma_chain(src, cycles, sink, sm, wg, ITERS, k, rs)
                launch()                                  # warm-up
                c, t = timed(torch, launch, cycles)
                label = f"{name} k={k}"
                per.append(c / ITERS)
                out["runs"][label] = {"cycles_per_group": c / ITERS, "clock_mhz_seen": c / t / 1e6,
                                      "flop_per_clk_per_sm": wg * k * FLOPS_WGMMA * ITERS / c}
                print(f"{label:14s} {c / ITERS:8.1f} cycles a group  "
                      f"{out['runs'][label]['flop_per_clk_per_sm']:6.0f} FLOP/clk/SM  clock {c / t / 1e6:5.0f} MHz")
            slope, icpt = np.polyfit(np.array(KSTEPS, float), np.array(per), 1)
            out["fits"][name] = {
                "cycles_per_wgmma": float(slope), "wait_cycles": float(icpt),
                "pipe_cycles_per_wgmma": FLOPS_WGMMA * wg / 4096,
                "wait_beyond_pipe_cycles": [float(p - k * FLOPS_WGMMA * wg / 4096) for k, p in zip(KSTEPS, per)]}
            print(f"  fit: {slope:.1f} cycles a wgmma, {icpt:.1f} cycles a group's wait")
    common.write_record(path, torch, tool, out, indent=1,
                       data="torch.randn fp16 (seed 0), a different slice per block")


if __name__ == "__main__":
    common.run_script(main)
