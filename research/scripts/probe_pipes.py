"""How a warp scheduler's pipes combine under FlashAttention-2's instruction mix (the pipe-mix probe,
probe_csrc/probe.cu probe_mix_kernel): SM cycles per loop iteration for single instruction classes (mma.sync, ldmatrix.x4,
ldmatrix.x4.trans, MUFU.EX2, FFMA) and for their mixes, at 1, 2 and 4 warps per scheduler. From it: the SM cycles
one ldmatrix.x4 costs, and whether the pipes' times add or overlap. Usage: python3 research/scripts/probe_pipes.py OUT.json"""

import common

# (name, n_mma, n_ldsm, n_ex2, n_ffma, trans) per warp per iteration
MIXES = [
    ("mma64", 64, 0, 0, 0, 0), ("ldsm32", 0, 32, 0, 0, 0), ("ldsm32t", 0, 32, 0, 0, 1),
    ("ex2_64", 0, 0, 64, 0, 0), ("ffma128", 0, 0, 0, 128, 0),
    ("mma64+ldsm32", 64, 32, 0, 0, 0), ("mma64+ex2_64", 64, 0, 64, 0, 0), ("mma64+ffma128", 64, 0, 0, 128, 0),
    ("ldsm32+ex2_64", 0, 32, 64, 0, 0), ("ldsm32+ffma128", 0, 32, 0, 128, 0), ("ex2_64+ffma128", 0, 0, 64, 128, 0),
    ("mma64+ldsm32+ex2_64+ffma128", 64, 32, 64, 128, 0),
    # FA2's loop step per warp (fa2_tc's counts rounded to multiples of 8): d=64, Br=64 (MT=1), Bc=64:
    # 64 mma, 32 ldmatrix, 32 ex2 (34), 152 FP32; d=128, Br=128 (MT=2), Bc=64: 256 mma, 80 ldmatrix, 64 ex2 (68),
    # 368 FP32
    ("fa2_d64_mt1", 64, 32, 32, 152, 0), ("fa2_d128_mt2", 256, 80, 64, 368, 0),
]
WARPS = (4, 8, 16)


def main(out_path):
    torch, tool, ext, sm, cycles = common.script_setup()
    sink = torch.zeros(1, device="cuda")
    iters = 256
    res = {}
    for name, m, l, e, f, tr in MIXES:
        res[name] = {"per_warp": {"mma": m, "ldmatrix_x4": l, "ex2": e, "ffma": f, "trans": bool(tr)}}
        for w in WARPS:
            res[name][f"sm_cycles_per_iter_{w}w"] = common.best_cycles_per_iter(
                torch, lambda: ext.probe_mix(cycles, sink, sm, w, iters, m, l, e, f, bool(tr)), cycles, iters)
        print(name, {w: round(res[name][f"sm_cycles_per_iter_{w}w"], 1) for w in WARPS}, flush=True)
    common.write_record(out_path, torch, tool, {"mixes": res, "iters": iters, "blocks": sm,
                                               "warps_per_block": list(WARPS)}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
