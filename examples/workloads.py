"""The model's error on the H200's inference and training datasets, by workload, beside the naive answers a user
would otherwise reach for: the roofline (KV-cache and tensor bytes at the datasheet bandwidth, FLOPs at the peak)
for the forward, and "backward = 2.5x forward" (the model's forward times 2.5, 3.5 for forward plus backward) for
the backward. fa2_tc's rows are scored on the held-out split (its path costs were fitted on the H100's training
split; none of these rows are fitted to), the SDPA presets' on every row (nothing is fitted to them).

Writes examples/benchmarks/workloads.json, which docs/accuracy.md's tables and tests/evaluation/test_workloads.py
read. Run from the repository root: python examples/workloads.py
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from perfmodel.evaluation import advice, dataset, validate
from perfmodel.evaluation.fit import training_mask
from perfmodel.hw import calibration, gpu as gpu_mod
from perfmodel.kernels import get
from perfmodel.model import engine

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "measurements" / "h200"
OUT = ROOT / "examples" / "benchmarks" / "workloads.json"
KERNELS = ("fa2_tc", "sdpa-flash", "sdpa-cudnn")


def naive(ms, spec, kernel):
    """Per row: the roofline time of the problem's own FLOPs and tensors (forward) or the model's forward times
    2.5 (bwd) / 3.5 (fwd_bwd)."""
    out = np.empty(len(ms))
    for group in ms.shapes():
        m = ms.group(*group)
        shape = ms.shape(m)
        if shape.mode == "fwd":
            peak = spec.tensor_flops(shape.dtype) or spec.fp32_flops
            out[m] = np.maximum(shape.useful_flops() / peak, shape.tensor_bytes() / spec.dram_bw_peak)
        else:
            fwd = shape.with_mode("fwd")
            k = get(kernel)
            own = k.library_tiles(shape, spec) if k.external else k.Tiles.from_columns(ms.tile_columns(m))
            p = engine.evaluate(spec, k, fwd, k.forward_tiles(shape, own, spec), calibration.resolve(spec))
            out[m] = np.asarray(p.time_s, float) * (2.5 if shape.mode == "bwd" else 3.5)
    return out


def score(pred, meas, groups=None):
    ape = np.abs(pred / meas - 1) * 100
    d = {"n": int(len(meas)), "mape": float(ape.mean()), "median_ape": float(np.median(ape)),
         "max_ape": float(ape.max()), "bias": float(np.median(pred / meas - 1) * 100)}
    if groups is not None:
        sp = validate.grouped_spearman(groups, pred, meas)[0]
        d["spearman"] = float(sp) if sp is not None and np.isfinite(sp) else None     # needs 3+ tiles a problem
    return d


def compute() -> dict:
    out = {}
    predicted = {}                      # (kernel, part) -> (measurement set, predictions): head_dims reuses them
    for kernel in KERNELS:
        for part in ("infer", "bwd"):
            (ms,) = dataset.load([DATA / f"{kernel}.{part}.csv"])
            spec = gpu_mod.match_device_name(ms.gpu_name)
            if kernel == "fa2_tc":                       # fitted on the H100's training split: score held-out rows
                ms = ms.select(~training_mask(ms.rows))
            pred, _ = validate.predict_set(ms, spec, calibration.resolve(spec))
            predicted[(kernel, part)] = ms, pred
            base = naive(ms, spec, kernel)
            c = ms.cols
            kinds = advice.workloads(c["Nq"], c["Nk"], c["H"], c["Hkv"], ms.mode)
            groups = ms.problems()
            for w in sorted(set(kinds.tolist())):
                m = kinds == w
                sub = [g for g, keep in zip(groups, m) if keep]
                out[f"{kernel}/{w}"] = {"model": score(pred[m], ms.measured_s[m], sub),
                                        "naive": score(base[m], ms.measured_s[m]),
                                        "split": "test" if kernel == "fa2_tc" else "all"}
    out["head_dims"] = head_dims(predicted)
    out["command"] = "python examples/workloads.py"
    out["naive"] = ("forward: max(useful FLOPs / datasheet peak, problem tensors / datasheet DRAM bandwidth); "
                    "backward: the model's forward x 2.5 (fwd_bwd: x 3.5)")
    return out


def head_dims(predicted: dict) -> dict:
    """The SDPA presets' forward rows by head dim: kernel -> d -> {decode, prefill (plain, grouped and cross)}; the
    inference sets' head dims, those of the head-dim check set (KERNEL.headdims.csv: d 48, 112, 160, 192, 200) and
    the d = 32 check set's (KERNEL.d32.csv). ``predicted``: sets compute() has predicted already, by (kernel, part)."""
    rows: dict = {}                     # (kernel, d, workload) -> [(predicted, measured) arrays]
    for kernel, part in ((k, p) for k in KERNELS[1:] for p in ("infer", "headdims", "d32")):
        if (kernel, part) in predicted:
            ms, pred = predicted[(kernel, part)]
        else:
            (ms,) = dataset.load([DATA / f"{kernel}.{part}.csv"])
            spec = gpu_mod.match_device_name(ms.gpu_name)
            pred, _ = validate.predict_set(ms, spec, calibration.resolve(spec))
        c = ms.cols
        decode = advice.workloads(c["Nq"], c["Nk"], c["H"], c["Hkv"], ms.mode) == "decode"
        for d in sorted(set(c["d"].tolist())):
            for w, m in (("decode", decode), ("prefill", ~decode)):
                m = m & (c["d"] == d)
                if m.any():
                    rows.setdefault((kernel, str(d), w), []).append((pred[m], ms.measured_s[m]))
    out: dict = {}
    for (kernel, d, w), parts in rows.items():
        out.setdefault(kernel, {}).setdefault(d, {})[w] = score(*(np.concatenate(x) for x in zip(*parts)))
    return out


def packaged(result: dict) -> dict:
    """What `perfmodel predict` quotes beside a prediction of these workloads (perfmodel/evaluation/
    measured_workloads.json): kernel -> GPU -> workload -> {mape, max_ape, rows, split}."""
    out: dict = {}
    for key, v in result.items():
        if isinstance(v, dict) and "model" in v:
            kernel, workload = key.split("/")
            m = v["model"]
            out.setdefault(kernel, {}).setdefault("h200", {})[workload] = {
                "mape": round(m["mape"], 2), "max_ape": round(m["max_ape"], 1), "rows": m["n"], "split": v["split"]}
    return out


if __name__ == "__main__":
    result = compute()
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    advice.WORKLOADS.write_text(json.dumps(packaged(result), indent=1) + "\n")
    for k, v in result.items():
        if isinstance(v, dict) and "model" in v:
            m, n = v["model"], v["naive"]
            print(f"{k:32s} n={m['n']:4d} model {m['mape']:5.1f}% (worst {m['max_ape']:5.0f}%)  naive "
                  f"{n['mape']:5.1f}% (worst {n['max_ape']:5.0f}%)")
    for kernel, dims in result["head_dims"].items():
        for d, ws in sorted(dims.items(), key=lambda kv: int(kv[0])):
            cells = (f"{w} n={m['n']:3d} {m['mape']:5.1f}% (worst {m['max_ape']:4.0f}%)" for w, m in ws.items())
            print(f"{kernel:10s} d {d:>3s}  " + "  ".join(cells))
