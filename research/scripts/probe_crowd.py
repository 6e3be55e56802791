"""How long a block waits for a K/V-sized tile, from L2 or from DRAM, beside a phase of compute, as more SMs load at
once (probe_csrc/probe.cu probe_crowd_kernel; research/notes/known-gaps-log.md). Lone fa2_tc blocks spend more per tile as more heads run
(d = 64, 64 x 64: +19% from 16 to 128 SMs), and timed without the L2 flush the same launches spend 36-46% less per
tile and grow 4% (research/data/h100/lone-crowd/): what the flush adds grows with the heads. Is it the wait
for each K/V tile's first touch in DRAM?

One block per SM, of 128 or 256 threads; each iteration it copies one tile (8 or 16 KB, 16-byte cp.async.cg) of its
own or of one region all blocks share, spins 0-1600 cycles and waits for the tile. A ring of 4 tiles stays in L2;
a ring as long as the iterations, after an L2 flush, reads every tile from DRAM once. Records the SM cycles per
iteration (median block, least of 3 launches) against the blocks (SMs) loading.

Usage: python3 research/scripts/probe_crowd.py OUT.json"""
from perfmodel.measure import bench
import common

BLOCKS = (1, 2, 4, 8, 16, 32, 64, 96, 128, 132)
TILES = (8192, 16384)
THREADS = (128, 256)
SPINS = (0, 400, 800, 1600)
ITERS = 64


def main(out_path):
    torch, tool, ext, sm, cycles = common.script_setup()
    flusher = bench.Bencher(torch)
    src = torch.randint(0, 1 << 30, (sm * ITERS * max(TILES) // 4,), dtype=torch.int32, device="cuda")
    runs = []
    for source, ring in (("l2", 4), ("dram", ITERS)):
        for tile in TILES:
            for threads in THREADS:
                for shared in (False, True):
                    for spin in SPINS:
                        for blocks in (b for b in BLOCKS if b <= sm):
                            view = cycles[:blocks]

                            def launch():
                                if source == "dram":
                                    flusher.flush_l2()
                                ext.probe_crowd(view, src, blocks, threads, ITERS, tile, shared, spin, ring)

                            if source == "l2":
                                launch()                  # the ring's first touch
                            best = common.best_cycles_per_iter(torch, launch, view, ITERS)
                            runs.append({"source": source, "tile_bytes": tile, "threads": threads, "shared": shared,
                                         "spin": spin, "blocks": blocks, "sm_cycles_per_iter": best})
                            print(runs[-1], flush=True)
    common.write_record(out_path, torch, tool, {"iters": ITERS, "runs": runs}, indent=None)


if __name__ == "__main__":
    common.run_script(main)
