"""Which FP32-class instructions share mma.sync's time (research/csrc/probe_fp32_kinds.cu): SM cycles per loop
iteration of FFMA, FMULs predicated off and on, FMNMX, MUFU.EX2 (ftz) and exp2f without ftz, alone and beside 64
mma.sync a warp, at 1, 2 and 4 warps a scheduler; and two softmax steps of one warp's 128 x 128 tile at d = 32, as
FlashAttention-2 (SDPA flash) and fa2_tc compile them. Usage: python3 research/scripts/probe_fp32_kinds.py OUT.json"""

from perfmodel.errors import InputError

import common

KINDS = ("mma", "ffma", "off", "on", "fmnmx", "ex2", "ex2f")
# per warp per iteration; multiples of 8
MIXES = {
    "mma64": {"mma": 64},
    "ffma128": {"ffma": 128}, "off128": {"off": 128}, "on128": {"on": 128}, "fmnmx128": {"fmnmx": 128},
    "ex2_64": {"ex2": 64}, "ex2f_64": {"ex2f": 64},
    "mma64+ffma128": {"mma": 64, "ffma": 128}, "mma64+off128": {"mma": 64, "off": 128},
    "mma64+on128": {"mma": 64, "on": 128}, "mma64+fmnmx128": {"mma": 64, "fmnmx": 128},
    "mma64+ex2_64": {"mma": 64, "ex2": 64}, "mma64+ex2f_64": {"mma": 64, "ex2f": 64},
    # one warp's KV step at d = 32, Br = Bc = 128, 4 warps (64 scores a thread), by Nsight Compute's executed counts
    # (research/data/h200/flash_sass/flash_d32_sass.tar.gz, flash_tc_pipes.tar.gz): SDPA flash's 64 HMMA, 64 exp2f
    # without ftz (each an FSETP, two FMULs predicated off, a MUFU), 64 FMNMX, 216 FMUL and FADD; fa2_tc's 64 HMMA,
    # 64 MUFU, 64 FMNMX, 168 FFMA, FMUL and FADD
    "flash_d32_step": {"mma": 64, "ex2f": 64, "fmnmx": 64, "ffma": 216},
    "tc_d32_step": {"mma": 64, "ex2": 64, "fmnmx": 64, "ffma": 168},
}
WARPS = (4, 8, 16)


def main(out_path):
    torch, tool, ext = common.load_cuda("probe_fp32_kinds.cu", "fp32_kinds", deps=("probe_mma.cuh",))
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    cycles = torch.zeros(sm, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, device="cuda")
    iters = 256
    res = {}
    for name, mix in MIXES.items():
        counts = [mix.get(k, 0) for k in KINDS]
        res[name] = {"per_warp": dict(zip(KINDS, counts))}
        for w in WARPS:
            res[name][f"sm_cycles_per_iter_{w}w"] = common.best_cycles_per_iter(
                torch, lambda: ext.run(cycles, sink, w, iters, counts), cycles, iters)
        print(name, {w: round(res[name][f"sm_cycles_per_iter_{w}w"], 1) for w in WARPS}, flush=True)
        if min(res[name][f"sm_cycles_per_iter_{w}w"] for w in WARPS) <= 0:
            raise InputError("the probe kernel ran no loop: was it built for sm_80 or later?")
    common.write_record(out_path, torch, tool, {"mixes": res, "iters": iters, "blocks": sm,
                                               "warps_per_block": list(WARPS)}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
