"""Do cp.async fills take the shared-memory cycles that ldmatrix reads need? (the fill probe, probe_csrc/probe.cu
probe_fill_kernel). One block of W warps per SM; each iteration every warp issues n_ldsm ldmatrix.x4 (4 wavefronts
each) and n_cp 16-byte cp.async copies per lane (a 512-byte warp instruction: 4 wavefronts of stores) of an
L2-resident buffer. SM cycles per iteration for ldmatrix alone, copies alone and both: if the copies' stores share
the reads' wavefront slots, both take about the ldmatrix time plus the store wavefronts; if not, about the larger
of the two. Usage: python3 research/scripts/probe_fill.py OUT.json"""

import common

# (n_ldsm, n_cp) per warp per iteration
MIXES = [(32, 0), (0, 4), (0, 8), (32, 4), (32, 8), (64, 8), (64, 16), (0, 16)]
WARPS = (4, 8, 16)


def main(out_path):
    torch, tool, ext, sm, cycles = common.script_setup()
    sink = torch.zeros(1, device="cuda")
    src = torch.randint(0, 1 << 30, (sm * 65536 // 4,), dtype=torch.int32, device="cuda")
    iters = 512
    runs = []
    for w in WARPS:
        for n_ldsm, n_cp in MIXES:
            best = common.best_cycles_per_iter(
                torch, lambda: ext.probe_fill(cycles, sink, src, sm, w, iters, n_ldsm, n_cp), cycles, iters)
            runs.append({"warps": w, "n_ldsm": n_ldsm, "n_cp": n_cp, "sm_cycles_per_iter": best,
                         "ldsm_wavefronts_per_iter": 4 * n_ldsm * w, "store_wavefronts_per_iter": 4 * n_cp * w})
            print(runs[-1], flush=True)
    common.write_record(out_path, torch, tool, {"runs": runs, "iters": iters, "blocks": sm}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
