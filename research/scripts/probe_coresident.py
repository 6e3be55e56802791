"""How much co-resident fa2_tc blocks hide of one another, tile by tile: the same launch timed with one, two or four
blocks a SM (research/notes/known-gaps-log.md: what a second block on the SM hides). The model's join then let a block's latency
path be hidden only by the other blocks on its SM (a p growing with them, since removed); these runs found the p a
launch needs following the tile more than the blocks, which the join's ``overlap_rows`` now carries. Lone and
many-wave rows differ in more than the blocks a SM (one round against many, first touches in DRAM against L2 hits),
so here only those change: the kernel asks for dynamic shared memory it never touches (``extra_smem``), the smallest
amount that leaves ``r`` blocks a SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor), in the same grid. Each launch
is first checked against the float64 reference on fresh inputs with a poisoned output, then timed as ``perfmodel
measure`` times (L2 flushed, the SM clock measured around each run).

Usage: python3 research/scripts/probe_coresident.py OUT.json      (the record is rewritten after every launch)"""
from perfmodel.kernels import get
from perfmodel.measure import bench, runner
from perfmodel.shape import AttentionShape
import common

# (d, Br, Bc, warps): the tiles that run more than one block a SM at d = 64 and 128, and 128x128/8w (one) beside them
TILES = ((128, 64, 64, 4), (128, 128, 64, 4), (128, 64, 128, 4), (128, 128, 128, 8),
         (64, 64, 64, 4), (64, 128, 128, 4), (64, 64, 128, 4))
SHAPES = ((32, 16, 2048, False), (32, 16, 2048, True))          # B, H, N, causal: many waves, fp16
TOLERANCE = runner.TOLERANCE["fp16"]                             # as perfmodel measure checks


def extra_for(ext, d, br, bc, w, blocks, limit):
    """The least extra shared memory (bytes, a multiple of 128) that leaves ``blocks`` blocks a SM, None if none."""
    lo, hi = 0, limit
    if ext.fa2_tc_max_blocks_per_sm(d, br, bc, w, "fp16", hi) > blocks:
        return None
    while hi - lo > 128:                       # blocks fall as the extra grows: bisect for the first that fits
        mid = (lo + hi) // 2 // 128 * 128
        if ext.fa2_tc_max_blocks_per_sm(d, br, bc, w, "fp16", mid) > blocks:
            lo = mid
        else:
            hi = mid
    return hi if ext.fa2_tc_max_blocks_per_sm(d, br, bc, w, "fp16", hi) == blocks else None


def main(out_path):
    torch, tool, ext, sm, _ = common.script_setup(kernels=True)
    props = torch.cuda.get_device_properties(0)
    optin = int(getattr(props, "shared_memory_per_block_optin", 232448))
    kernel = get("fa2_tc")
    bencher = bench.Bencher(torch)
    runs = []
    for B, H, N, causal in SHAPES:
        for d, br, bc, w in TILES:
            shape = AttentionShape(B, H, N, d, "fp16", causal)
            tiles = kernel.Tiles(Br=br, Bc=bc, warps=w)
            base = ext.fa2_tc_attributes(d, br, bc, w, "fp16")["dynamic_smem_bytes"]
            natural = ext.fa2_tc_max_blocks_per_sm(d, br, bc, w, "fp16")
            for blocks in range(natural, 0, -1):
                extra = 0 if blocks == natural else extra_for(ext, d, br, bc, w, blocks, optin - base)
                if extra is None:
                    continue
                run = kernel.runner(torch, ext, shape, tiles)
                run.launch = lambda Q, K, V, run=run, extra=extra: ext.fa2_tc_forward(
                    Q, K, V, run.O, br, bc, w, causal, extra_smem=extra)
                err = runner.check_correct(torch, run, seed=len(runs) + 1)
                row = {"B": B, "H": H, "N": N, "d": d, "causal": causal, "Br": br, "Bc": bc, "warps": w,
                       "blocks_per_sm": blocks, "extra_smem": extra, "smem_bytes": base + extra, "rel_err": err}
                if not err <= TOLERANCE:
                    row["skipped"] = "failed the float64 check"
                else:
                    Q, K, V = run.inputs(len(runs) + 1000)
                    t = bencher.run(lambda: run.launch(Q, K, V))
                    row.update(time_ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms, runs=t.n_runs,
                               median_cycles=t.median_cycles, sm_clock_mhz_before=t.clock_before_mhz,
                               sm_clock_mhz_after=t.clock_after_mhz)
                runs.append(row)
                print(row, flush=True)
                common.write_record(out_path, torch, tool, {"tolerance": TOLERANCE, "runs": runs}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
