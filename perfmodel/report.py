"""Presentation: prediction dicts (what --json prints), strict JSON, unit formatting, and rich tables.

Nothing here runs the model: callers pass predictions (perfmodel.model.engine.Prediction) or data prepared by
perfmodel.evaluation.
"""

from __future__ import annotations

import json
import math

import numpy as np
from rich.console import Console
from rich.table import Table

from perfmodel.evaluation import advice


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


def binary(nbytes: float) -> str:
    """Memory sizes as datasheets give them: 40 MiB, 228 KiB."""
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:g} B"


def _finite(x):
    """JSON-safe: NaN and infinities become None, numpy scalars Python numbers."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def error_pct(ape) -> str:
    """An absolute percent error for a table: '4.2%' up to 1000%, beyond that the ratio it stands for
    (3104961% over -> '31,000x'); '—' where there is none."""
    import math

    if ape is None or not math.isfinite(ape):
        return "—"
    if ape < 1000:
        return f"{ape:.1f}%"
    ratio = ape / 100 + 1                     # predicted/measured where the prediction is too high
    return f"{float(f'{ratio:.2g}'):,.0f}x"


def dumps(obj, indent=2) -> str:
    """Strict JSON (never NaN or Infinity)."""
    return json.dumps(_finite(obj), indent=indent, allow_nan=False)


def write_json(doc: dict, key: str, items, write, indent=1) -> None:
    """Strict JSON of ``doc`` with ``doc[key]`` the list of ``items``, one item a line, each passed to ``write`` as
    it comes: a list of millions (a sweep's --json) never sits in memory whole."""
    mark = "\x00items"
    head, tail = dumps({**doc, key: [mark]}, indent=indent).split(json.dumps(mark))
    sep = "," + head[head.rindex("\n"):]            # a comma, then a new line indented as the list's items
    encode = json.JSONEncoder(allow_nan=False).encode       # one encoder for every item, not one an item

    def text(item) -> str:
        # an item of plain numbers is encoded as it is; one holding NaN, infinity or a numpy scalar, made finite
        try:
            return encode(item)
        except (TypeError, ValueError):
            return encode(_finite(item))
    write(head)
    for i, item in enumerate(items):
        write((sep if i else "") + text(item))
    write(tail)


def _f(x) -> float:
    return float(np.asarray(x))


def prediction_dict(pred) -> dict:
    """A scalar engine.Prediction as one JSON-ready dict."""
    c, t, L = pred.counts, pred.timing, pred.launch
    flops = _f(c.flops)
    dram = _f(pred.traffic.dram_bytes)
    byts = {"dram": dram, "l2": _f(c.l2_bytes), "smem": _f(c.smem_bytes)}
    s = pred.shape
    return {
        "model": "perfmodel",
        "gpu": pred.gpu.key,
        "gpu_name": pred.gpu.name,
        "kernel": pred.kernel,
        "params": dict(B=int(s.B), H=int(s.H), Hkv=int(s.Hkv), Nq=int(s.Nq), Nk=int(s.Nk), d=int(s.d), dtype=s.dtype,
                       causal=bool(s.causal), mode=s.mode,
                       **{k: int(np.asarray(getattr(pred.tiles, k))) for k in pred.tiles.fields()}),
        "calibration": pred.calibration.source,
        "constants": pred.constants,
        "path_costs": pred.path_costs,
        "ceilings": pred.ceilings.basis,
        "notes": list(pred.notes),
        "flops": flops,
        "useful_flops": _f(s.useful_flops()),
        "tensor_bytes": _f(s.tensor_bytes()),
        # a decode step's KV cache (K and V of every K/V head), and the split-KV count the launch runs
        "kv_cache_bytes": _f(2.0 * _f(s.kv_heads) * _f(s.Nk) * _f(s.d) * s.element_bytes),
        "splits": int(_f(getattr(pred.tiles, "splits", 1))),
        "achieved": achieved(pred),
        "flops_by_kind": {"fma": _f(c.fma), "exp": _f(c.exp), "max": _f(c.cmp), "add": _f(c.add), "mul": _f(c.mul)},
        "bytes": byts,
        "bytes_detail": {"dram_read": _f(pred.traffic.dram_read_bytes),
                         "dram_write": _f(pred.traffic.dram_write_bytes),
                         "l2_read": _f(c.l2_read_bytes), "l2_write": _f(c.l2_write_bytes),
                         "smem_load": _f(c.smem_ld_bytes), "smem_store": _f(c.smem_st_bytes)},
        "intensity": {k: (flops / v if v else None) for k, v in byts.items()},
        "smem_wavefronts": _f(c.smem_wavefronts),
        "smem_bank_conflicts": _f(c.bank_conflicts),
        "warp_instructions": {"fp32": _f(c.warp_fp32), "sfu": _f(c.warp_sfu), "lds": _f(c.warp_lds),
                              "sts": _f(c.warp_sts), "ldg": _f(c.warp_ldg), "stg": _f(c.warp_stg),
                              "other": _f(c.warp_other)},
        "launch": {"grid_blocks": int(_f(L.grid_blocks)), "threads_per_block": int(_f(L.threads)),
                   "smem_bytes_per_block": int(_f(L.smem_bytes)), "regs_per_thread": int(_f(L.regs)),
                   "blocks_per_sm": int(_f(pred.blocks_per_sm)), "waves": _f(pred.waves),
                   "warps_per_sm": _f(pred.warps_per_sm)},
        "time_s": _f(t.time_s),
        "times_s": {k: _f(v) for k, v in t.times_s.items()},
        "bound": str(np.asarray(t.bound)),
        # the SM clock the launch is timed at; and, where the calibration has a power model (model.power), the
        # bench's average power, the clock then held to the board's limit where that power would exceed it
        "clock_mhz": _f(t.clock_hz) / 1e6 if t.clock_hz is not None else None,
        "power_w": _f(t.power_w) if t.power_w is not None else None,
        "roofline_time_s": _f(pred.roofline_time_s),
        # every kernel the call runs, in order, each with its own time and bound; their times add to time_s
        "launches": [{"kernel": lt.name, "grid_blocks": int(_f(lt.launch.grid_blocks)),
                      "threads_per_block": int(_f(lt.launch.threads)), "regs_per_thread": int(_f(lt.launch.regs)),
                      "smem_bytes_per_block": int(_f(lt.launch.smem_bytes)), "blocks_per_sm": int(_f(lt.blocks_per_sm)),
                      "time_s": _f(lt.time_s), "bound": str(np.asarray(lt.timing.bound))}
                     for lt in pred.launches if _f(lt.launch.grid_blocks) > 0],
        # how this kernel's predictions fared against the committed measurements, on this GPU and on those measured,
        # with the shipped calibrations (``shipped_calibration``: whether this prediction uses this GPU's)
        "measured_accuracy": dict(advice.measured_accuracy(pred.kernel, pred.gpu.key, advice.workload_of(s)),
                                  shipped_calibration=pred.calibration.shipped),
    }


def achieved(pred) -> dict:
    """Rates at the predicted time: useful TFLOP/s (FlashAttention's convention, shape.useful_flops) and its share
    of the GPU's datasheet peak for the dtype; GB/s of the problem's tensors (shape.tensor_bytes: Q, K, V, O and, in
    a backward, the gradients) and its share of the datasheet DRAM bandwidth."""
    t = _f(pred.time_s)
    if not (t > 0 and math.isfinite(t)):
        return {"tflops": None, "tflops_share": None, "gbps": None, "gbps_share": None}
    s, g = pred.shape, pred.gpu
    peak = g.tensor_flops(s.dtype) if s.dtype != "fp32" else None
    peak = peak or g.fp32_tflops * 1e12
    flops, nbytes = _f(s.useful_flops()) / t, _f(s.tensor_bytes()) / t
    return {"tflops": flops / 1e12, "tflops_share": flops / peak, "peak_tflops": peak / 1e12,
            "gbps": nbytes / 1e9, "gbps_share": nbytes / g.dram_bw_peak, "peak_gbps": g.dram_bw_peak / 1e9}


def _accuracy_line(kernel: str, acc: dict) -> str:
    """One line on how the kernel's predictions fared against measurements (prediction_dict's measured_accuracy)."""
    here = acc.get("this_gpu")
    what = acc.get("workload", "plain")
    of = "" if what == "plain" else f" on {what}"
    if here:
        rows = (f"{here['rows']} held-out launches" if here["split"] == "test"
                else f"{here['rows']} launches, none of them fitted to")
        source = "examples/accuracy.json" if what == "plain" else "examples/benchmarks/workloads.json"
        text = (f"measured on this GPU{of}: {here['mape']:.1f}% mean error, {here['max_ape']:.0f}% worst, over {rows} "
                f"({source})")
        return text if acc.get("shipped_calibration", True) else text + ", with its shipped calibration, not this one"
    if acc.get("gpus"):
        return (f"not measured on this GPU{of}, so its error here is unknown; {kernel}{of} on the GPUs measured: "
                + ", ".join(f"{g} {e['mape']:.1f}% mean ({e['max_ape']:.0f}% worst)" for g, e in acc["gpus"].items()))
    return f"{kernel} has not been measured{of}: its prediction is unvalidated"


def seed_dict(gpu, kernel: str, params: dict, sp) -> dict:
    flops = _f(sp.flops)
    byts = {"dram": _f(sp.dram_bytes), "l2": _f(sp.l2_bytes), "smem": _f(sp.l1_bytes)}
    return {
        "model": "seed", "gpu": gpu.key, "gpu_name": gpu.name, "kernel": kernel, "params": params,
        "flops": flops, "bytes": byts, "intensity": {k: (flops / v if v else None) for k, v in byts.items()},
        "smem_wavefronts": None,
        "time_s": _f(sp.time_s), "times_s": {k: _f(v) for k, v in sp.times_s.items()},
        "bound": str(np.asarray(sp.bound)), "roofline_time_s": _f(sp.roofline_time_s),
    }


def shape_text(p: dict) -> str:
    """'B=2 H=32 Hkv=8 Nq=1 Nk=4096 d=128 bf16 causal bwd' from a prediction's params (N where Nq == Nk, Hkv where
    it differs from H, the dtype where not fp32, the mode where not fwd)."""
    parts = [f"B={p['B']}", f"H={p['H']}"]
    if p.get("Hkv", p["H"]) != p["H"]:
        parts.append(f"Hkv={p['Hkv']}")
    nq, nk = p.get("Nq", p.get("N")), p.get("Nk", p.get("N"))
    parts += [f"N={nq}"] if nq == nk else [f"Nq={nq}", f"Nk={nk}"]
    parts.append(f"d={p['d']}")
    if p.get("dtype", "fp32") != "fp32":
        parts.append(p["dtype"])
    if p.get("causal"):
        parts.append("causal")
    if p.get("mode", "fwd") != "fwd":
        parts.append(p["mode"])
    return " ".join(parts)


SHAPE_PARAMS = ("B", "H", "Hkv", "N", "Nq", "Nk", "d", "dtype", "causal", "mode")


def render_prediction(console: Console, d: dict) -> None:
    p = d["params"]
    tiles = " ".join(f"{k}={v}" for k, v in p.items() if k not in SHAPE_PARAMS)
    console.print(f"[bold]{d['kernel']} on {d['gpu_name']} — {shape_text(p)} {tiles} (model: {d['model']})[/bold]")
    work = Table(show_edge=False)
    work.add_column("level")
    work.add_column("work", justify="right")
    work.add_column("FLOP/byte", justify="right")
    work.add_row("FLOPs" + (" (executed)" if d.get("useful_flops") is not None else ""), si(d["flops"], "FLOP"), "")
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
    runs = d.get("launches", ())
    if len(runs) > 1:
        for i, q in enumerate(runs, start=1):
            console.print(f"launch {i}, {q['kernel']}: {q['grid_blocks']} blocks × {q['threads_per_block']} threads, "
                          f"{q['regs_per_thread']} regs/thread → {q['blocks_per_sm']} blocks/SM, "
                          f"{si(q['time_s'], 's')} ({q['bound']})")
    times = Table(show_edge=False)
    times.add_column("resource")
    times.add_column("time alone", justify="right")
    for k, v in sorted(d["times_s"].items(), key=lambda kv: -kv[1]):
        if v or k == d["bound"]:                       # pipes the kernel does not use (tensor cores, say) left out
            times.add_row(k + (" ◀ bound" if k == d["bound"] else ""), si(v, "s"))
    console.print(times)
    console.print(f"predicted time: [bold]{si(d['time_s'], 's')}[/bold]  (bound: {d['bound']})   "
                  f"roofline time: {si(d['roofline_time_s'], 's')}")
    if d.get("measured_accuracy", {}).get("workload") == "decode" or d.get("splits", 1) > 1:
        console.print(f"KV cache: {si(d['kv_cache_bytes'], 'B')}; split-KV: {d.get('splits', 1)} "
                      f"block{'s' if d.get('splits', 1) > 1 else ''} a query tile")
    a = d.get("achieved") or {}
    if a.get("tflops") is not None:
        console.print(f"achieved: {a['tflops']:.3g} TFLOP/s ({a['tflops_share'] * 100:.2g}% of {a['peak_tflops']:.4g} peak), "
                      f"{a['gbps']:.4g} GB/s of the problem's tensors ({a['gbps_share'] * 100:.2g}% of "
                      f"{a['peak_gbps']:.4g} GB/s)")
    if d.get("clock_mhz"):
        power = f", {d['power_w']:.0f} W averaged over the bench's runs" if d.get("power_w") is not None else ""
        console.print(f"SM clock: {d['clock_mhz']:.0f} MHz{power}")
    if "constants" in d:
        console.print(f"constants: {d['constants']}")
    if "measured_accuracy" in d:
        console.print(_accuracy_line(d["kernel"], d["measured_accuracy"]))
    for n in d.get("notes", []):
        console.print(f"note: {n}")
