"""fa2_tc with SDPA flash's exponential, timed beside the measured build and SDPA flash itself.

    python3 research/scripts/fa2_tc_noftz.py OUT.json

Builds research/csrc/fa2_tc_noftz.cu (fa2_tc compiled with FA2TC_EX2_NOFTZ: ex2.approx.f32 without .ftz, which adds
SDPA flash's FSETP and two predicated FMULs around each MUFU.EX2, three FP32-class instructions a score, and changes
nothing else) as its own extension module. Every tile is first checked against the float64 reference (runner.
reference) on fresh random inputs with a NaN-poisoned output, both builds, causal and not, at a ragged N. Then each
problem is timed interleaved (bench.Bencher.interleaved: every run after an L2 flush, run r of each call before run
r + 1 of any): the measured build, the no-ftz build and, where fa2_tc's tile is the one SDPA flash runs at that head
dim, SDPA flash (the incumbent). What it asks: does the model, which prices SDPA flash's d = 32 prefill 11-19% slow,
misprice the same per-score surplus on a kernel of ours (research/scripts/noftz_model.py compares)."""

import math

import common

# (d, Br, Bc, warps): SDPA flash's tiles at d 32, 64, 128 (FlashAttention-2's forward launch templates), and two
# others a head dim
TILES = [(32, 128, 128, 4), (32, 128, 64, 4), (32, 64, 64, 4), (64, 128, 128, 4), (64, 128, 64, 4), (64, 64, 64, 4),
         (128, 128, 64, 4), (128, 64, 64, 4), (128, 128, 128, 8)]
FLASH_TILE = {32: (128, 128, 4), 64: (128, 128, 4), 128: (128, 64, 4)}
NS = (512, 1024, 2048, 4096, 8192, 16384)
TOKENS, H, DTYPE = 32768, 16, "bf16"
RUNS = 20


def main(path):
    run(path, {"fa2_tc_noftz": ("fa2_tc_noftz.cu", "noftz")}, TILES)


def run(path, builds: dict, tiles):
    """Check and time the measured build and each of ``builds`` (name -> (research/csrc source, tag); each module
    defines fa2_tc_noftz_forward) at ``tiles``, with SDPA flash beside at its tiles; the record into ``path``."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from perfmodel.measure import bench, build, runner

    main_ext = build.load()
    calls = {"fa2_tc": main_ext.fa2_tc_forward}
    for name, (source, tag) in builds.items():
        _, tool, ext = common.load_cuda(source, tag, deps=("fa2_tc_noftz.cu", "fa2_tc.cu", "fa2_tc_ptx.cuh",
                                                           "sm_timer.cuh"))
        calls[name] = ext.fa2_tc_noftz_forward
    dt = torch.bfloat16
    out = {"tiles": tiles, "builds": {k: v[0] for k, v in builds.items()}, "dtype": DTYPE, "H": H, "runs": RUNS,
           "checks": [], "rows": []}
    gen = torch.Generator(device="cuda").manual_seed(20261202)
    for d, Br, Bc, w in tiles:
        for causal in (False, True):
            shape = (2, 4, 1000, d)
            Q, K, V = (torch.randn(shape, generator=gen, device="cuda", dtype=dt) for _ in range(3))
            ref = runner.reference(torch, Q, K, V, causal=causal)
            for name, fn in calls.items():
                O = torch.full(shape, float("nan"), device="cuda", dtype=dt)
                fn(Q, K, V, O, Br, Bc, w, causal)
                torch.cuda.synchronize()
                err = float(torch.linalg.norm(O.double() - ref) / torch.linalg.norm(ref))
                ok = math.isfinite(err) and err < runner.TOLERANCE[DTYPE]
                out["checks"].append({"kernel": name, "d": d, "Br": Br, "Bc": Bc, "warps": w, "causal": causal,
                                      "rel_err": err, "ok": ok})
                print(f"check {name} d{d} {Br}x{Bc}/{w}w causal={int(causal)}: rel err {err:.2e}", flush=True)
                if not ok:
                    raise SystemExit(f"error: {name} d{d} {Br}x{Bc}/{w}w causal={int(causal)} fails the float64 check")

    bencher = bench.Bencher(torch)
    for d, Br, Bc, w in tiles:
        for N in NS:
            B = max(1, TOKENS // N)
            for causal in (False, True):
                Q, K, V = (torch.randn((B, H, N, d), generator=gen, device="cuda", dtype=dt) for _ in range(3))
                O = torch.empty_like(Q)
                fns = {name: (lambda fn=fn: fn(Q, K, V, O, Br, Bc, w, causal)) for name, fn in calls.items()}
                if FLASH_TILE[d] == (Br, Bc, w):
                    def flash():
                        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                            F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
                    fns["sdpa-flash"] = flash
                timed = bencher.interleaved(fns, runs=RUNS)
                row = {"B": B, "H": H, "N": N, "d": d, "Br": Br, "Bc": Bc, "warps": w, "causal": int(causal),
                       **{f"{k}_ms": t.median_ms for k, t in timed.items()},
                       **{f"{k}_p20_ms": t.p20_ms for k, t in timed.items()},
                       **{f"{k}_p80_ms": t.p80_ms for k, t in timed.items()},
                       "clock_mhz": timed["fa2_tc"].clock_before_mhz}
                out["rows"].append(row)
                others = ", ".join(f"{k} {row[k + '_ms'] / row['fa2_tc_ms']:.3f}x" for k in timed if k != "fa2_tc")
                print(f"B{B} N{N} d{d} {Br}x{Bc}/{w}w causal={int(causal)}: fa2_tc {row['fa2_tc_ms']:.4f} ms, "
                      f"{others}", flush=True)
        common.write_record(path, torch, tool, out, indent=1)     # after each tile: a cut-off run keeps its rows


if __name__ == "__main__":
    common.run_script(main)
