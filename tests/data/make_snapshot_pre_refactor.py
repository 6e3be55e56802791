"""Snapshot of the pre-refactor predictions of every committed row (both GPUs, both kernels, fitted and probe-only).
Runs on the code before the kernel-interface refactor (git checkout cc76299 -- perfmodel), not on the current API."""
import csv, json, glob
import numpy as np
from perfmodel import calibration, gpu as gpu_mod, model
out = {}
for f in sorted(glob.glob("examples/measurements/h*/fa[12].csv")):
    rows = list(csv.DictReader(open(f)))
    spec = gpu_mod.match_device_name(rows[0]["gpu_name"])
    for fits in (True, False):
        cal = calibration.resolve(spec, use_fits=fits)
        kernel = rows[0]["kernel"]
        P = {k: np.array([int(r[k]) for r in rows]) for k in ("B","H","N","d","Br","Bc","threads","pad","regs_per_thread")}
        p = model.predict_arrays(spec, kernel, cal, P["B"], P["H"], P["N"], P["d"], P["Br"], P["Bc"], P["threads"], P["pad"], regs=P["regs_per_thread"])
        c = p.counts
        out[f"{f}|{'fitted' if fits else 'probe'}"] = {
            "time_s": np.asarray(p.time_s, float).tolist(),
            "dram_bytes": np.broadcast_to(c.dram_bytes, P["N"].shape).astype(float).tolist(),
            "smem_wavefronts": np.broadcast_to(c.smem_wavefronts, P["N"].shape).astype(float).tolist(),
            "flops": np.broadcast_to(c.flops, P["N"].shape).astype(float).tolist(),
        }
json.dump(out, open("tests/data/snapshot_predictions.json", "w"))
print({k: len(v["time_s"]) for k, v in out.items()})
