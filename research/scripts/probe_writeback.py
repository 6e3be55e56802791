"""What the timing's written L2 flush costs a launch that reads fresh data from DRAM, by how much it reads (JSON).

    python3 research/scripts/probe_writeback.py OUT.json

`measure` flushes the L2 before every timed run by writing a 256 MiB buffer (perfmodel/measure/bench.py), which
leaves the L2 full of dirty lines; each line a launch then brings in may first have to write a dirty one back to
DRAM. The cold-start probe (research/scripts/probe_cold.py) saw it at two sizes: touch launches reading 35 and 69 MB took
4.5-5.1 and 9.8 us longer after the written flush than after a read one. Here the same touch launch (csrc/
probe_cold.cu: 8 blocks a SM, each summing its own packed slice with 16-byte loads) reads 4 to 100 MB, one size
after another, each timed under three flushes: "zero" (the one `measure` uses), "read" (the buffer is read: the L2
holds clean lines) and "none" (the launch's own data may still be in L2 from the run before). zero - read is the
write-back's cost at that size: whether it grows with the bytes read up to the L2's size and stops there is what
a model of it needs. Nothing here changes clocks or power limits.
"""
import json

from perfmodel.measure import bench
from probe_cold import ReadFlush          # the read flush (research/scripts/ is on the path: this script's folder)
import common

KIB_PER_BLOCK = (4, 8, 12, 16, 24, 32, 40, 48, 64, 96)


def main(path):
    torch, tool, ext = common.load_cuda("probe_cold.cu", "cold")
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    grid = 8 * sm
    benchers = {"zero": bench.Bencher(torch), "read": ReadFlush(torch), "none": bench.Bencher(torch, flush=False)}
    dst = torch.zeros(grid, device="cuda")
    rows = []
    for kib in KIB_PER_BLOCK:
        nbytes = kib * 1024
        src = torch.randint(0, 1 << 30, (grid * nbytes // 4,), dtype=torch.int32, device="cuda")
        for mode, b in benchers.items():
            t = b.run(lambda: ext.touch(src, dst, grid, nbytes, nbytes, 0), min_runs=50, max_runs=200)
            rows.append({"grid": grid, "bytes_per_block": nbytes, "bytes": grid * nbytes, "flush": mode,
                         "median_us": t.median_ms * 1e3, "p20_us": t.p20_ms * 1e3, "p80_us": t.p80_ms * 1e3,
                         "n_runs": t.n_runs})
            print(f"{grid * nbytes / 1e6:7.1f} MB flush={mode:4s} {t.median_ms * 1e3:9.2f} us", flush=True)
        del src
    json.dump({"provenance": common.script_provenance(torch, tool), "sm_count": sm,
               "flush_bytes": benchers["zero"].cache.numel() * 4, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    common.run_script(main)
