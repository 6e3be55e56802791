"""How long `perfmodel sweep --gpu rtx3090 --N 1:100000:1 --best` takes on this machine, the whole command
(100,000 problems x 16 tiles = 1.6 M configurations, the fastest tile per problem). Records the wall time in
examples/benchmarks/sweep_best_rtx3090.json. Run from the repository root: python examples/bench_sweep_best.py"""
import datetime
import json
import os
import platform
import subprocess
import time

cmd = ["perfmodel", "sweep", "--gpu", "rtx3090", "--N", "1:100000:1", "--best"]
t0 = time.perf_counter()
r = subprocess.run(cmd, capture_output=True, text=True)
wall = time.perf_counter() - t0
assert r.returncode == 0, r.stderr
rec = {"command": " ".join(cmd), "wall_s": round(wall, 2), "exit_code": r.returncode,
       "stderr": r.stderr.strip().splitlines(), "cpu": platform.processor() or platform.machine(),
       "cores": os.cpu_count(), "python": platform.python_version(),
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "recorded_by": "python examples/bench_sweep_best.py"}
json.dump(rec, open("examples/benchmarks/sweep_best_rtx3090.json", "w"), indent=2)
print(json.dumps(rec, indent=2))
