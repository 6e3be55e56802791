"""How fast cp.async.cg fills shared memory from L2 and from DRAM, with nothing else running: the ceiling under
FlashAttention-2's K/V tile loads that `perfmodel probe`'s L2 read bandwidth (its kernel reads L1) does not measure
(research/notes/known-gaps-log.md). research/csrc/probe_stream.cu: every block streams 16 KiB tiles of its slice into a ring of S tiles,
S - 1 in flight, waiting for the oldest and passing a barrier at each, as a pipelined FA2 block does; 128 threads
a block, 1, 2 or 4 blocks an SM (held there by their shared memory).

* ``l2``: the slices together fill 0.4x the L2 and are walked round and round (all hits after the first pass);
  ``group`` 1: each block its own slice; 2: two consecutive blocks (the two SMs of a TPC) walk one slice together,
  the in-step reading whose requests L2 counts once (test_l2_share_probe.py);
* ``dram``: each block walks its own slice once, after an L2 flush, the slices together 2 GiB or more.

Records each launch's requested bytes a second (the median of 5 CUDA-event timings) and a clock of the SMs.
Usage: python3 research/scripts/probe_l2_stream.py OUT.json. Nothing here changes clocks or power limits."""
import numpy as np

from perfmodel.measure import bench
import common

TILE = 16384
THREADS = 128
L2_ITERS = 1024
DRAM_ITERS = 256


def configs(sm: int, l2_bytes: int, smem_per_sm: int) -> list:
    """Every launch, in order: (source, blocks an SM, stages, group, slice bytes, iterations, shared memory)."""
    out = []
    for per_sm in (1, 2, 4):
        smem = common.smem_for_blocks_per_sm(smem_per_sm, per_sm)
        blocks = sm * per_sm
        for stages in (s for s in (2, 3, 4, 8) if s * TILE <= smem):
            for group in (1, 2):
                slice_bytes = max(int(0.4 * l2_bytes) // (blocks // group) // TILE, 1) * TILE
                out.append(dict(source="l2", blocks_per_sm=per_sm, blocks=blocks, stages=stages, group=group,
                                slice_bytes=slice_bytes, iters=L2_ITERS, smem_bytes=smem))
            out.append(dict(source="dram", blocks_per_sm=per_sm, blocks=blocks, stages=stages, group=1,
                            slice_bytes=(DRAM_ITERS + stages) * TILE, iters=DRAM_ITERS, smem_bytes=smem))
    return out


def main(out_path):
    from perfmodel.measure import runner

    torch, tool, ext = common.load_cuda("probe_stream.cu", "stream")
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    cs = configs(sm, props.L2_cache_size, props.shared_memory_per_multiprocessor)
    need = max(-(-c["blocks"] // c["group"]) * c["slice_bytes"] for c in cs)
    src = torch.randint(0, 1 << 30, (need // 4,), dtype=torch.int32, device="cuda")
    flusher = bench.Bencher(torch)
    clock = runner.Clock()
    runs = []
    for c in cs:
        def launch():
            ext.stream(src, c["slice_bytes"], c["group"], TILE, c["stages"], c["iters"], c["blocks"], THREADS,
                       c["smem_bytes"])

        launch()                                          # warm-up (and the L2 slices' first touch)
        times = []
        for _ in range(5):
            if c["source"] == "dram":
                flusher.flush_l2()
            s, e = bench.events_around(torch, launch)
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) * 1e-3)
        t = float(np.median(times))
        mhz = clock.sm_mhz()
        mhz = float(mhz) if isinstance(mhz, (int, float)) else float("nan")
        requested = c["blocks"] * c["iters"] * TILE
        runs.append(dict(c, seconds=t, requested_tbps=requested / t / 1e12, sm_clock_mhz=mhz,
                         bytes_per_clk_per_sm=requested / t / (sm * mhz * 1e6)))
        print(runs[-1], flush=True)
    common.write_record(out_path, torch, tool, {"tile_bytes": TILE, "threads": THREADS, "sm_count": sm,
                                               "l2_bytes": props.L2_cache_size, "runs": runs}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
