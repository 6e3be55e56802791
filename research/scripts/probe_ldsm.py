"""How many shared-memory wavefronts a clock ldmatrix.x4 delivers on this GPU, with loads no compiler can merge
(probe_csrc/probe.cu probe_ldsm_kernel: each load's row addresses come from the value its chain's previous load returned).
The fill probe's ldmatrix streams lost loads (research/notes/known-gaps-log.md) and the pipe-mix probe's stream re-reads one 2 KB
block; this one settles the rate the model prices (1 a clock, 128 B). One block per SM of 1-32 warps, each warp
running 1, 2, 4 or 8 independent chains, non-transposed and transposed; records SM cycles per iteration (median block,
least of 3 launches) and the wavefronts per clock (4 a load). Then every warp of the block reads the same rows at the
same step (`same`), as FlashAttention-2's warps all read each K/V fragment: if identical requests from several warps
were served once, the rate counted per warp would pass 1 a clock.

Usage: python3 research/scripts/probe_ldsm.py OUT.json"""

import common

WARPS = (1, 4, 8, 16, 32)
CHAINS = (1, 2, 4, 8)
ITERS = 2048


def main(out_path):
    torch, tool, ext, sm, cycles = common.script_setup()
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    runs = []
    for same in (False, True):
        for trans in (False, True):
            for warps in WARPS:
                for chains in CHAINS:
                    per_iter = common.best_cycles_per_iter(
                        torch, lambda: ext.probe_ldsm(cycles, sink, sm, warps, ITERS, chains, trans, same), cycles,
                        ITERS)
                    runs.append({"same": same, "trans": trans, "warps": warps, "chains": chains,
                                 "sm_cycles_per_iter": per_iter, "wavefronts_per_clk": 4 * warps * chains / per_iter})
                    print(runs[-1], flush=True)
    common.write_record(out_path, torch, tool, {"iters": ITERS, "blocks": sm, "runs": runs}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
