"""How much of a re-used working set L2 keeps, by re-use distance: the share of re-uses that miss when every block
walks its own slice of a buffer again and again (probe_csrc/probe.cu probe_reuse_kernel), for lines only read, lines
re-written each pass (dirty, as fa1's O, l and m), and re-written lines beside a streamed read of a quarter of their
size a pass (fa1's K/V tiles). The DRAM model (perfmodel/model/memory.py) prices fa1's re-reads by such a distance
with a ramp fitted on the H100's Nsight Compute counters; this measures the ramp itself, on any GPU.

Run under Nsight Compute, which flushes L2 before each launch and counts its DRAM bytes:
  ncu --cache-control all --clock-control none --kernel-name regex:probe_reuse --metrics ... --csv --page raw \\
      python3 research/scripts/probe_l2_reuse.py launch CONFIGS.json          (research/scripts/gpu_run.sh probe-l2-reuse)
then, anywhere:
  python3 research/scripts/probe_l2_reuse.py join NCU.csv CONFIGS.json OUT.json
A launch's re-use misses: (DRAM bytes read - the buffer's first touch - the streamed bytes) / (passes - 1) / buffer."""
import json
import common

SIZES_MB = (8, 16, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 80, 96, 128)
MODES = {"read": (False, 0.0), "rewrite": (True, 0.0), "rewrite_stream": (True, 0.25)}
PASSES = 6
BLOCKS_PER_SM = 4
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
           "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum")


def configs(sm: int) -> list:
    """Every launch, in the order the launch step makes them: mode, buffer bytes, floats a block re-uses and
    streams a pass."""
    blocks = sm * BLOCKS_PER_SM
    out = []
    for mode, (write, stream) in MODES.items():
        for mb in SIZES_MB:
            live = (mb << 20) // 4 // blocks // 4 * 4
            out.append({"mode": mode, "write": write, "blocks": blocks, "passes": PASSES, "live_floats": live,
                        "stream_floats": int(live * stream) // 4 * 4, "buffer_bytes": 4 * live * blocks})
    return out


def launch(configs_path):

    torch, tool, ext, sm, _ = common.script_setup()
    cs = configs(sm)
    sink = torch.zeros(1, device="cuda")
    for c in cs:
        buf = torch.zeros(c["blocks"] * c["live_floats"], device="cuda")
        extra = torch.zeros(max(c["passes"] * c["blocks"] * c["stream_floats"], 1), device="cuda")
        ext.probe_reuse(buf, c["live_floats"], c["passes"], c["write"], extra, c["stream_floats"], sink, c["blocks"])
        torch.cuda.synchronize()
        del buf, extra
    common.write_record(configs_path, torch, tool, {"configs": cs}, indent=1)


def join(ncu_csv, configs_path, out_path):
    """Match the profiled launches (in order) to the configurations; the re-use miss share of each."""

    header, data, rec = common.ncu_launches(ncu_csv, configs_path, "probe_l2_reuse")
    cs = rec["configs"]
    runs = []
    for c, r in zip(cs, data):
        m = {k: float(r[header.index(k)].replace(",", "")) for k in METRICS if k in header}
        size = c["buffer_bytes"]
        streamed = 4 * c["passes"] * c["blocks"] * c["stream_floats"]
        reuse = (c["passes"] - 1) * size
        miss = (m["dram__bytes_read.sum"] - size - streamed) / reuse
        runs.append(dict(c, distance_bytes=size + 4 * c["blocks"] * c["stream_floats"], reuse_miss=miss,
                         dram_write_per_pass=m["dram__bytes_write.sum"] / c["passes"] / size, ncu=m))
    rec.update(runs=runs, ncu_csv=ncu_csv)
    rec.pop("configs")
    json.dump(rec, open(out_path, "w"), indent=1)


if __name__ == "__main__":

    common.ncu_probe_main(launch, join, __doc__)
