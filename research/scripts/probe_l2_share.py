"""How much L2 a re-read line takes by how many blocks read it and where they sit: the share of re-reads that
miss when a buffer is walked again and again by blocks spread over the whole GPU, over a few SMs, or over SMs of
one part of it.

The DRAM rule (perfmodel/model/memory.py) prices a head's K/V re-read across waves as held ``1 + shared_copy``
times (fitted: 0.75), on the reading that lines read by SMs on both sides of the H100's two-partition L2 are kept
in both. This probe measures that directly (probe_csrc/probe_share.cu, 4 blocks of 256 threads per SM, all resident):

* ``group`` launches: ``g`` consecutive blocks read one slice, so each line has g readers placed where the block
  scheduler puts consecutive blocks (g = 1: private slices, as probe_l2_reuse's read mode; g = all: one buffer
  read by every block);
* ``smset`` launches: every block reads one buffer, but only blocks on the SMs of a set do (by SM id: all, the
  lower or upper half of the ids, the first 16, the first 16 and 64-79, or alternate runs of 16).

For each, buffers from 16 to 96 MiB; the share of re-reads that miss is (DRAM bytes read - the buffer) /
((passes - 1) x buffer). A line held twice takes twice the room, so its misses start at half the buffer size.

Run under Nsight Compute, which flushes L2 before each launch and counts its DRAM bytes (research/scripts/gpu_run.sh
probe-l2-share):
  ncu --cache-control all --clock-control none --kernel-name regex:share_kernel --metrics ... --csv --page raw \\
      python3 research/scripts/probe_l2_share.py launch CONFIGS.json
then, anywhere:
  python3 research/scripts/probe_l2_share.py join NCU.csv CONFIGS.json OUT.json

Without Nsight Compute, the room for lines every block re-reads (the calibration's ``l2_shared_bytes``) is found
from the same launch's times, as `perfmodel probe` does (perfmodel.measure.probe.shared_room_timed; step
probe-l2-share-timed, which also records the ncu-less figure beside this probe's):
  python3 research/scripts/probe_l2_share.py timed OUT.json
and the counted room on that grid (every block reading one buffer, 41 sizes from 0.2x to 1.2x L2; step
probe-l2-share-fine): SHARE_SET=fine with the launch step above.
Nothing here changes clocks or power limits."""
import json
import os
import sys

from perfmodel.measure.probe import SHARE_BLOCKS_PER_SM as BLOCKS_PER_SM, SHARE_PASSES as PASSES, half_miss
import common

SIZES_MB = (16, 24, 32, 40, 48, 56, 64, 72, 80, 96)
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
           "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum")


def sm_sets(sm: int) -> dict:
    """Named sets of SM ids whose blocks read (the rest exit at once)."""
    return {"all": list(range(sm)), "lower_half": list(range(sm // 2)), "upper_half": list(range(sm // 2, sm)),
            "first_16": list(range(16)), "0-15_and_64-79": list(range(16)) + list(range(64, 80)),
            "alternate_16s": [s for s in range(sm) if (s // 16) % 2 == 0]}


def configs(sm: int) -> list:
    """Every launch, in the order the launch step makes them."""
    blocks = sm * BLOCKS_PER_SM
    out = []
    runs = [("group", g, "all") for g in (1, 2, 8, 32, sm, blocks)]
    runs += [("smset", blocks, name) for name in sm_sets(sm) if name != "all"]
    for mode, group, sms in runs:
        for mb in SIZES_MB:
            slices = -(-blocks // group)
            slice_floats = (mb << 20) // 4 // slices // 4 * 4
            out.append({"mode": mode, "group": group, "sms": sms, "blocks": blocks, "passes": PASSES,
                        "slice_floats": slice_floats, "buffer_bytes": 4 * slice_floats * slices})
    return out


def fine_configs(sm: int, l2_bytes: int) -> list:
    """The launches of every block reading one buffer at the sizes `perfmodel probe` times them at
    (probe.shared_read_sizes): the counted room on the timed room's grid (SHARE_SET=fine)."""
    from perfmodel.measure.probe import shared_read_sizes

    blocks = sm * BLOCKS_PER_SM
    return [{"mode": "group", "group": blocks, "sms": "all", "blocks": blocks, "passes": PASSES,
             "slice_floats": size // 4, "buffer_bytes": size} for size in shared_read_sizes(l2_bytes)]


def launch(configs_path):
    from perfmodel.measure import probe

    torch, tool, ext = probe.share_module()
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    share_set = os.environ.get("SHARE_SET", "")
    cs = fine_configs(sm, props.L2_cache_size) if share_set == "fine" else configs(sm)
    sets = sm_sets(sm)
    buf = torch.rand(max(c["buffer_bytes"] for c in cs) // 4, device="cuda")
    sink = torch.zeros(1, device="cuda")
    placed = {}
    for c in cs:
        active = torch.zeros(max(sm, 256), dtype=torch.int32)
        active[sets[c["sms"]]] = 1
        smid = torch.zeros(c["blocks"], dtype=torch.int32, device="cuda")
        ext.share(buf, c["slice_floats"], c["group"], c["passes"], active.cuda(), sink, smid, c["blocks"])
        torch.cuda.synchronize()
        placed.setdefault(c["group"], smid.cpu().tolist())
    common.write_record(configs_path, torch, tool, {"configs": cs, "sm_sets": sets, "share_set": share_set or "all",
                                                   "smid_by_block": {str(g): s for g, s in placed.items()}}, indent=1)


def join(ncu_csv, configs_path, out_path):
    """Match the profiled launches (in order) to the configurations; the re-read miss share of each."""
    header, data, rec = common.ncu_launches(ncu_csv, configs_path, "probe_l2_share")
    cs = rec["configs"]
    wanted = [k for k in header if k.startswith(("dram__", "gpu__time", "lts__"))]
    runs = []
    for c, r in zip(cs, data):
        m = {k: float(r[header.index(k)].replace(",", "")) for k in wanted}
        size = c["buffer_bytes"]
        miss = (m["dram__bytes_read.sum"] - size) / ((c["passes"] - 1) * size)
        runs.append(dict(c, reread_miss=miss, ncu=m))
    rec.update(runs=runs, ncu_csv=ncu_csv)
    rec.pop("configs")
    json.dump(rec, open(out_path, "w"), indent=1)


def shared_room(record: dict) -> float:
    """half_miss of the buffer every block re-reads (the ``group`` launches of all blocks): the room L2 gives
    widely shared lines (calibration ``l2_shared_bytes``)."""
    return half_miss((r["buffer_bytes"], r["reread_miss"]) for r in record["runs"]
                     if r["mode"] == "group" and r["group"] == r["blocks"])


def timed(out_path):
    """The all-blocks launch timed at 41 sizes (shared_room_timed), three times over, with its provenance."""
    from perfmodel.measure import probe

    torch, tool, ext = probe.share_module()
    props = torch.cuda.get_device_properties(0)
    runs = [probe.shared_room_timed(torch, ext, props.multi_processor_count, props.L2_cache_size)
            for _ in range(3)]
    common.write_record(out_path, torch, tool, {"sm_count": props.multi_processor_count,
                                               "l2_bytes": props.L2_cache_size, "passes": PASSES,
                                               "blocks_per_sm": BLOCKS_PER_SM, "runs": runs}, indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "timed":
        timed(sys.argv[2])
    else:
        common.ncu_probe_main(launch, join, __doc__)
