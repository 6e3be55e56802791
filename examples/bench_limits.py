"""Time and peak memory at perfmodel's size limits, each command in a fresh process (docs/cli.md, "Size
limits", quotes the figures):

* ``sweep --csv`` and ``sweep --json`` of a 2M-configuration sweep (sweep.MAX_CONFIGURATIONS), to /dev/null;
* the API's ``perfmodel.sweep`` given ``N=np.arange(1, 20_000_001)`` (refused in one line);
* ``fit`` on a generated 1M-row fa1 CSV (the H100 rows of examples/measurements, each at many batch sizes, so
  almost every row is its own configuration), written to a temporary folder with a copy of the H100 probe
  calibration.

Peak RSS is the child's maximum resident set (resource.getrusage). Records the run in
examples/benchmarks/limits.json under LABEL (default "after"), beside the runs recorded under other labels, with
the commit of the perfmodel it ran. Run from the repository root:

    python examples/bench_limits.py [--skip-fit] [--as LABEL]

The "before" run is this script run from the root of an older checkout, in an environment where that checkout is
installed (pip install -e OLD; the commands then run its perfmodel and read its gpus/): python
NEW/examples/bench_limits.py --as before, then copy its record into this one."""
import csv
import datetime
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile

SWEEP = ["perfmodel", "sweep", "--gpu", "h100", "--kernel", "fa1", "--B", "1:1116:1", "--H", "1:16:1",
         "--N", "128:8192:x2", "--d", "64"]          # 1116 x 16 x 7 x (4 x 4 tiles) = 1,999,872 configurations
API = [sys.executable, "-c", "import numpy as np, perfmodel\ntry:\n perfmodel.sweep(gpu='h100', kernel='fa1', "
       "N=np.arange(1, 20_000_001))\nexcept perfmodel.errors.InputError as e:\n raise SystemExit(f'InputError: {e}')"]
FIT_ROWS = 1_000_000


def measure(cmd, stdout=subprocess.DEVNULL):
    """(wall seconds, peak RSS in MB, exit code, stderr lines) of ``cmd`` run in a fresh process."""
    probe = ("import resource, subprocess, sys, time\nt = time.perf_counter()\n"
             "r = subprocess.run(sys.argv[1:], stdout=sys.stdout, stderr=subprocess.PIPE, text=True)\n"
             "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode,"
             " file=sys.stderr)\nsys.stderr.write(r.stderr)")
    r = subprocess.run([sys.executable, "-c", probe] + cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    first, *rest = r.stderr.splitlines()
    wall, rss_kb, code = first.split()
    return {"command": " ".join(cmd), "wall_s": round(float(wall), 2), "peak_rss_mb": round(int(rss_kb) / 1024),
            "exit_code": int(code), "stderr": rest[-3:]}


def fit_csv(path, rows=FIT_ROWS, seed=1):
    """``rows`` fa1 rows in the one-length schema: the H100 fa1 rows' configurations, each at a random batch
    multiple (up to 1024, its tensors under 40 GB), timed by the model itself (the shipped H100 calibration)
    with 3% noise, so that a fit has something to find."""
    import numpy as np

    from perfmodel import api
    from perfmodel.kernels import get
    from perfmodel.model import engine
    from perfmodel.shape import AttentionShape

    src = list(csv.DictReader(open("examples/measurements/h100/fa1.csv")))
    cols = ["kernel", "B", "H", "N", "d", "Br", "Bc", "threads", "pad", "median_ms", "gpu_name"]
    rng = random.Random(seed)
    picked = [rng.choice(src) for _ in range(rows)]
    batch = [int(r["B"]) * rng.randint(1, max(1, min(1024, int(40e9 // (16 * int(r["B"]) * int(r["H"]) * int(r["N"])
                                                                          * int(r["d"]))))))
             for r in picked]                          # Q, K, V and O in fp32 under 40 GB
    col = lambda c: np.array([int(r[c]) for r in picked])
    spec, k = api.load_gpu("h100"), get("fa1")
    t = engine.evaluate(spec, k, AttentionShape(np.array(batch), col("H"), col("N"), col("d")),
                        k.Tiles(Br=col("Br"), Bc=col("Bc")), api.load_calibration(spec)).time_s
    t = np.asarray(t) * 1e3 * np.exp(np.random.default_rng(seed).normal(0, 0.03, rows))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r, b, ms in zip(picked, batch, t.tolist()):
            w.writerow([r["kernel"], b] + [r[c] for c in cols[2:9]] + [f"{ms:.6g}", r["gpu_name"]])


def commit() -> str:
    """The commit of the perfmodel the commands import, '+' where its package folder has uncommitted changes."""
    import perfmodel

    where = os.path.dirname(os.path.dirname(perfmodel.__file__))
    git = lambda *a: subprocess.run(["git", "-C", where, *a], capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + ("+" if git("status", "--porcelain", "--", "perfmodel") else "")


def main():
    label = sys.argv[sys.argv.index("--as") + 1] if "--as" in sys.argv else "after"
    rec = {"perfmodel_commit": commit(), "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
           "python": platform.python_version(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    rec["sweep_csv"] = measure(SWEEP + ["--csv"])
    rec["sweep_json"] = measure(SWEEP + ["--json"])
    rec["api_sweep_20M"] = measure(API)
    if "--skip-fit" not in sys.argv:
        tmp = tempfile.mkdtemp()
        try:
            data, cal = os.path.join(tmp, "fa1.csv"), os.path.join(tmp, "cal.yaml")
            fit_csv(data)
            shutil.copy("examples/measurements/h100/probe-calibration.yaml", cal)
            rec["fit_1M"] = dict(measure(["perfmodel", "fit", data, "--kernel", "fa1", "--calibration", cal]),
                                 rows=FIT_ROWS, csv_mb=round(os.path.getsize(data) / 2 ** 20))
        finally:
            shutil.rmtree(tmp)
        rec = json.loads(json.dumps(rec).replace(tmp, "TMP"))       # the temporary folder's name, not this machine's
    rec = json.loads(json.dumps(rec).replace(sys.executable, "python"))
    path = "examples/benchmarks/limits.json"
    runs = {}
    if os.path.exists(path):
        with open(path) as f:
            runs = json.load(f)
    runs = {"recorded_by": "python examples/bench_limits.py [--skip-fit] [--as LABEL]",
            **{k: v for k, v in runs.items() if k != "recorded_by"}, label: rec}
    os.makedirs("examples/benchmarks", exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(runs, indent=2) + "\n")
    print(json.dumps(rec, indent=2))


if __name__ == "__main__":
    main()
