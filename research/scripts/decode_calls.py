"""What fa2_tc's split-KV decode call runs on the GPU at each split count, as JSON.
    python3 research/scripts/decode_calls.py OUT.json
One query against a KV cache (B 1, H 32, Hkv 1 and 8, 8k and 32k keys, d 64 and 128), split 1 to 128 ways: each call
is built by perfmodel's own runner, checked against the float64 reference, profiled as research/scripts/
sdpa_calls.py profiles a call (every GPU activity after `measure`'s flush and head start) and timed as `measure`
times it. The split kernel's and the combine's durations apart say what each split costs the combine, whose loop
walks the splits one after another. Diagnosis only: no timing here enters the model.
"""

from perfmodel.kernels import get
from perfmodel.measure.bench import Bencher
from perfmodel.shape import make_shape
import sdpa_calls
from sdpa_calls import profile_runner
import common

sdpa_calls.PROFILED_CALLS = 2

PROBLEMS = [(1, 32, Hkv, 1, Nk, d) for Hkv in (1, 8) for Nk in (8192, 32768) for d in (64, 128)]
SPLITS = (1, 2, 4, 8, 16, 32, 64, 128)


def main(path):
    from perfmodel.measure import build, runner

    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    ext = build.load()
    bench = Bencher(torch)
    k = get("fa2_tc")
    rows = []
    for B, H, Hkv, Nq, Nk, d in PROBLEMS:
        shape = make_shape(B, H, None, d, dtype="bf16", causal=False, Hkv=Hkv, Nq=Nq, Nk=Nk)
        for s in SPLITS:
            row = {"kernel": "fa2_tc", "B": B, "H": H, "Hkv": Hkv, "Nq": Nq, "Nk": Nk, "d": d, "splits": s,
                   "dtype": "bf16"}
            try:
                tiles = k.make_tiles(shape, Br=64, Bc=128, splits=s)
                r = k.runner(torch, ext, shape, tiles)
                row["rel_err"] = float(runner.check_correct(torch, r, seed=0))
                profile_runner(torch, bench, r, row, 1, 10, 100)
            except Exception as exc:          # a split count the kernel refuses: kept with its reason
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            rows.append(row)
            print(Hkv, Nk, d, s, row.get("error") or ("event %.1f us %s" % (
                row["event_median_us"], [(a["name"][:40], round(a["dur_us"], 2)) for a in row["calls"][0]])),
                flush=True)
            torch.cuda.empty_cache()
    common.write_record(path, torch, tool, {"rows": rows}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
