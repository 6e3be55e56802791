"""Presentation: prediction dicts (what --json prints) and rich tables rendered from them."""

from __future__ import annotations

import math

import numpy as np
from rich.console import Console
from rich.table import Table

from perfmodel.gpu import GPUSpec
from perfmodel.problem import Config


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """1.23e9, 'B' -> '1.23 GB' (decimal prefixes throughout)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—" if value is None else str(value)
    if value == 0:
        return f"0 {unit}".strip()
    prefixes = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "µ"),
                (1e-9, "n")]
    for scale, p in prefixes:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {p}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def _f(x) -> float:
    return float(np.asarray(x))


def prediction_dict(gpu: GPUSpec, cfg: Config, pred, cal) -> dict:
    c, t = pred.counts, pred.timing
    flops = _f(c.flops)
    byts = {"dram": _f(c.dram_bytes), "l2": _f(c.l2_bytes), "smem": _f(c.smem_bytes)}
    return {
        "model": "perfmodel",
        "gpu": gpu.key,
        "gpu_name": gpu.name,
        "kernel": cfg.kernel,
        "params": cfg.to_dict(),
        "calibration": cal.source,
        "path_costs": "fitted" if cfg.kernel in cal.path_fits else "probe" if cal.source != "spec" else "spec",
        "flops": flops,
        "flops_by_kind": {"fma": _f(c.fma), "exp": _f(c.exp), "max": _f(c.cmp), "add": _f(c.add), "mul": _f(c.mul)},
        "bytes": byts,
        "bytes_detail": {"dram_read": _f(c.dram_read_bytes), "dram_write": _f(c.dram_write_bytes),
                         "l2_read": _f(c.l2_read_bytes), "l2_write": _f(c.l2_write_bytes),
                         "smem_load": _f(c.smem_ld_bytes), "smem_store": _f(c.smem_st_bytes)},
        "intensity": {k: (flops / v if v else None) for k, v in byts.items()},
        "smem_wavefronts": _f(c.smem_wavefronts),
        "smem_bank_conflicts": _f(c.bank_conflicts),
        "warp_instructions": {"fp32": _f(c.warp_fp32), "sfu": _f(c.warp_sfu), "lds": _f(c.warp_lds),
                              "sts": _f(c.warp_sts), "ldg": _f(c.warp_ldg), "stg": _f(c.warp_stg),
                              "other": _f(c.warp_other)},
        "launch": {"grid_blocks": int(_f(c.grid_blocks)), "threads_per_block": int(_f(c.threads_per_block)),
                   "smem_bytes_per_block": int(_f(c.smem_bytes_per_block)),
                   "regs_per_thread": int(_f(c.regs_per_thread)),
                   "blocks_per_sm": int(_f(t.blocks_per_sm)), "waves": _f(t.waves),
                   "warps_per_sm": _f(t.warps_per_sm)},
        "time_s": _f(t.time_s),
        "times_s": {k: _f(v) for k, v in t.times_s.items()},
        "bound": str(np.asarray(t.bound)),
        "roofline_time_s": _f(pred.roofline_time_s),
    }


def seed_dict(gpu: GPUSpec, cfg: Config, sp) -> dict:
    flops = _f(sp.flops)
    byts = {"dram": _f(sp.dram_bytes), "l2": _f(sp.l2_bytes), "smem": _f(sp.l1_bytes)}
    return {
        "model": "seed",
        "gpu": gpu.key,
        "gpu_name": gpu.name,
        "kernel": cfg.kernel,
        "params": cfg.to_dict(),
        "flops": flops,
        "bytes": byts,
        "intensity": {k: (flops / v if v else None) for k, v in byts.items()},
        "smem_wavefronts": None,
        "time_s": _f(sp.time_s),
        "times_s": {k: _f(v) for k, v in sp.times_s.items()},
        "bound": str(np.asarray(sp.bound)),
        "roofline_time_s": _f(sp.roofline_time_s),
    }


def render_prediction(console: Console, d: dict) -> None:
    p = d["params"]
    title = (f"{d['kernel']} on {d['gpu_name']} — B={p['B']} H={p['H']} N={p['N']} d={p['d']} "
             f"Br={p['Br']} Bc={p['Bc']}" + (f" threads={p['threads']} pad={p['pad']}" if d["kernel"] != "fa1" else "")
             + f" (model: {d['model']})")
    console.print(f"[bold]{title}[/bold]")
    work = Table(show_edge=False)
    work.add_column("level")
    work.add_column("work", justify="right")
    work.add_column("FLOP/byte", justify="right")
    work.add_row("FLOPs", si(d["flops"], "FLOP"), "")
    names = {"dram": "DRAM bytes", "l2": "L2 bytes", "smem": "shared-memory bytes"}
    for k, label in names.items():
        inten = d["intensity"][k]
        work.add_row(label, si(d["bytes"][k], "B"), f"{inten:.3g}" if inten else "—")
    if d.get("smem_wavefronts") is not None:
        work.add_row("shared wavefronts", si(d["smem_wavefronts"]), "")
        work.add_row("  of which bank conflicts", si(d["smem_bank_conflicts"]), "")
    console.print(work)
    if "launch" in d:
        L = d["launch"]
        console.print(f"launch: {L['grid_blocks']} blocks × {L['threads_per_block']} threads, "
                      f"{L['smem_bytes_per_block']} B shared, {L['regs_per_thread']} regs/thread → "
                      f"{L['blocks_per_sm']} blocks/SM, {L['waves']:.3g} waves, {L['warps_per_sm']:.3g} warps/SM")
    times = Table(show_edge=False)
    times.add_column("resource")
    times.add_column("time alone", justify="right")
    for k, v in sorted(d["times_s"].items(), key=lambda kv: -kv[1]):
        times.add_row(k + (" ◀ bound" if k == d["bound"] else ""), si(v, "s"))
    console.print(times)
    console.print(f"predicted time: [bold]{si(d['time_s'], 's')}[/bold]  (bound: {d['bound']})   "
                  f"roofline time: {si(d['roofline_time_s'], 's')}")
    if "calibration" in d:
        how = {"spec": "constants derived from the spec sheet (no probe calibration for this GPU)",
               "probe": "probe calibration", "fitted": "probe calibration; path costs fitted on a training split"}
        console.print(f"calibration: {d['calibration']} — {how[d['path_costs']]}")


def roofline_points(spec: GPUSpec, cal, kernel: str, values: dict, measured_rows: list[dict]):
    """One roofline point per fitting configuration of ``values`` (axis -> list, None = the kernel's default):
    FLOPs, bytes per level, predicted time, and the measured time where a row matches. Returns (points,
    configurations that do not fit)."""
    import itertools

    from perfmodel import kernels, model
    from perfmodel.problem import make_config

    keys = ("B", "H", "N", "d", "Br", "Bc", "threads", "pad")
    measured = {tuple(int(r[k]) for k in keys): float(r["median_ms"]) * 1e-3
                for r in measured_rows if r["kernel"] == kernel}
    k = kernels.get(kernel)
    points, skipped = [], []
    for combo in itertools.product(*(values[a] or [None] for a in keys)):
        cfg = make_config(kernel, *combo[:6], threads=combo[6], pad=combo[7])
        if not k.fits(spec, cfg.d, cfg.Br, cfg.Bc, cfg.threads, cfg.pad):
            skipped.append(cfg)
            continue
        pred = model.predict(spec, cfg, cal)
        c = pred.counts
        label = f"N={cfg.N} d={cfg.d} {cfg.Br}x{cfg.Bc}" + (f" T={cfg.threads} pad={cfg.pad}" if k.PADDED else "")
        points.append({"label": label, "flops": float(c.flops), "time_s": float(pred.time_s),
                       "bytes": {"dram": float(c.dram_bytes), "l2": float(c.l2_bytes), "smem": float(c.smem_bytes)},
                       "measured_s": measured.get(tuple(getattr(cfg, a) for a in keys))})
    return points, skipped


def scaling_panels(spec: GPUSpec, cal, kernel: str, rows: list[dict], B, H, d, Br, Bc, N):
    """Seed 000's two figures as data: time vs N at tiles (Br, Bc), and time vs tiles at N; each with our
    prediction, the seed model's and the measurement, for the kernel's default threads and padding."""
    from perfmodel import kernels, model, seed_model
    from perfmodel.errors import InputError

    k = kernels.get(kernel)
    default = [r for r in rows if int(r["pad"]) == k.DEFAULT_PAD
               and (not k.PADDED or int(r["threads"]) == k.DEFAULT_THREADS)]

    def panel(sel, xs, xlabel, order):
        sel = sorted(sel, key=order)
        P = {c: np.array([int(r[c]) for r in sel]) for c in ("N", "Br", "Bc", "threads", "pad", "regs_per_thread")}
        pred = model.predict_arrays(spec, kernel, cal, B, H, P["N"], d, P["Br"], P["Bc"], P["threads"], P["pad"],
                                    regs=P["regs_per_thread"])
        seed = seed_model.predict(spec, B, H, P["N"], d, P["Br"], P["Bc"])
        return {"x": [xs(r) for r in sel], "model_s": np.asarray(pred.time_s, float),
                "seed_s": np.asarray(seed.time_s, float),
                "measured_s": np.array([float(r["median_ms"]) * 1e-3 for r in sel]), "xlabel": xlabel}

    by_n = [r for r in default if (int(r["Br"]), int(r["Bc"])) == (Br, Bc)]
    by_t = [r for r in default if int(r["N"]) == N]
    if len(by_n) < 2 or len(by_t) < 2:
        raise InputError(f"too few measured rows for Br={Br} Bc={Bc} (over N) or N={N} (over tiles)")
    return (panel(by_n, lambda r: int(r["N"]), f"N (Br={Br}, Bc={Bc})", lambda r: int(r["N"])),
            panel(by_t, lambda r: f"{r['Br']}x{r['Bc']}", f"Br x Bc (N={N})", lambda r: (int(r["Br"]), int(r["Bc"]))))
