"""The data behind the figures: roofline points and seed 000's two scaling panels (model, seed, measured)."""

from __future__ import annotations

import numpy as np

from perfmodel.errors import InputError
from perfmodel.evaluation.dataset import MeasurementSet
from perfmodel.evaluation.sweep import SweepResult
from perfmodel.evaluation.validate import predict_set
from perfmodel.kernels import get as get_kernel
from perfmodel.model import seed
from perfmodel.shape import AXES


def roofline_points(res: SweepResult, measured: list[MeasurementSet]) -> list[dict]:
    """One point per fitting configuration of a sweep: FLOPs, bytes per level, predicted time, and the measured
    time where a row of the same kernel, shape and tiles exists."""
    k = get_kernel(res.kernel)
    meas = {}
    for ms in measured:
        if ms.kernel != res.kernel:
            continue
        for i in range(len(ms)):
            key = tuple(int(ms.cols[a][i]) for a in AXES) + tuple(int(ms.cols[c][i]) for c in ("Br", "Bc", "threads", "pad"))
            meas[key] = float(ms.measured_s[i])
    p = res.prediction
    full = res.time_s.shape
    c = p.counts
    flops = np.broadcast_to(c.flops, full)
    byts = {"dram": np.broadcast_to(p.traffic.dram_bytes, full), "l2": np.broadcast_to(c.l2_bytes, full),
            "smem": np.broadcast_to(c.smem_bytes, full)}
    points = []
    for params, t, _ in res.rows():
        ix = tuple(res.values[a].index(params[a]) for a in res.axes)
        tiles = k.Tiles(**{f: params[f] for f in k.Tiles.fields()})
        cols = {a: int(np.asarray(v)) for a, v in tiles.columns().items()}
        shape = res.shape_of(params)
        key = tuple(int(getattr(shape, a)) for a in AXES) + tuple(cols[c_] for c_ in ("Br", "Bc", "threads", "pad"))
        lengths = f"N={shape.Nq}" if shape.Nq == shape.Nk else f"Nq={shape.Nq} Nk={shape.Nk}"
        label = f"{lengths} d={params['d']} " + " ".join(f"{f}={params[f]}" for f in k.Tiles.fields())
        points.append({"label": label, "flops": float(flops[ix]), "time_s": t,
                       "bytes": {lv: float(b[ix]) for lv, b in byts.items()}, "measured_s": meas.get(key)})
    return points


def scaling_panels(spec, cal, ms: MeasurementSet, B, H, d, Br, Bc, N):
    """Seed 000's two figures as data: time vs N at tiles (Br, Bc), and time vs tiles at N; each with our
    prediction, the seed model's and the measurement, at the kernel's default for its other tile fields."""
    k = get_kernel(ms.kernel)
    default = k.default_tiles()
    # the kernel's first element type where the file has rows of it (fp16 for the tensor-core kernels)
    dtype = k.dtypes[0] if (ms.dtype == k.dtypes[0]).any() else str(ms.dtype[0])
    sel = (ms.cols["B"] == B) & (ms.cols["H"] == H) & (ms.cols["d"] == d) & (ms.dtype == dtype) & ~ms.causal
    for f in k.Tiles.fields():
        # a tile field the rows record (fa2's threads, pad); one they do not (fa2_tc's warps) selects nothing
        if f not in ("Br", "Bc") and f in ms.cols and getattr(default, f) is not None:
            sel &= ms.cols[f] == getattr(default, f)
    if not sel.any():
        raise InputError(f"no {ms.kernel} rows with B={B} H={H} d={d} in {', '.join(ms.files)}")

    def panel(mask, keys, xs, xlabel):
        idx = np.flatnonzero(mask)
        sub = ms.take(idx[np.lexsort([ms.cols[c][idx] for c in reversed(keys)])])
        pred, _ = predict_set(sub, spec, cal)
        P = sub.cols
        sd = seed.predict(spec, P["B"], P["H"], P["N"], P["d"], P["Br"], P["Bc"])
        return {"x": xs(sub), "model_s": pred, "seed_s": np.asarray(sd.time_s, float),
                "measured_s": sub.measured_s, "xlabel": xlabel}

    by_n = sel & (ms.cols["Br"] == Br) & (ms.cols["Bc"] == Bc)
    by_t = sel & (ms.cols["N"] == N)
    if by_n.sum() < 2 or by_t.sum() < 2:
        raise InputError(f"too few measured rows for Br={Br} Bc={Bc} (over N) or N={N} (over tiles)")
    return (panel(by_n, ["N"], lambda s: [int(x) for x in s.cols["N"]], f"N (Br={Br}, Bc={Bc})"),
            panel(by_t, ["Br", "Bc"], lambda s: [f"{a}x{b}" for a, b in zip(s.cols["Br"], s.cols["Bc"])],
                  f"Br x Bc (N={N})"))
