"""`perfmodel sweep`, `perfmodel roofline` and `perfmodel bench`: many configurations at once."""

from __future__ import annotations

import csv
import itertools
import sys

import click
import numpy as np
from rich.table import Table

from perfmodel import api, report
from perfmodel.cli import main
from perfmodel.cli.common import (calibration_option, err, figure_path, gpu_option, json_option, kernel_option, out,
                                  lengths_given, output_path, shape_options, tile_options)
from perfmodel.errors import InputError
from perfmodel.evaluation import advice, sweep as sw
from perfmodel.kernels import get as get_kernel
from perfmodel.shape import parse_dtype

RANGES = " (a value, a list 16,32,64 or a range 128:8192:x2 / 16:128:16)"
MAX_ROOFLINE_POINTS = 12


def _values(kw: dict) -> dict:
    return {a: sw.parse_values(a, v, lo=0 if a == "pad" else 1) for a, v in kw.items() if v is not None}


def _run(gpu_name, kernel, cal_path, dtype, causal, mode, kw, explore=True):
    lengths_given(kw, require=False)
    spec = api.load_gpu(gpu_name)
    values = _values(kw)
    dtype = None if dtype is None else parse_dtype(dtype)          # None: the kernel's first (api.kernel_dtype)
    res = api.sweep(spec, kernel, calibration=cal_path, dtype=dtype, causal=causal, explore=explore, mode=mode,
                    **values)
    beyond = res.fits & ~np.isfinite(res.time_s)
    if beyond.any():
        # sizes whose times leave float range (N near 2**31): said in one line and left out, never ranked as
        # fastest or printed as NaN
        res.fits = res.fits & ~beyond
        res.time_s = np.where(beyond, np.inf, res.time_s)
        err.print(f"left out {int(beyond.sum())} configurations whose predicted time overflows (the largest "
                  f"sizes): the model has no finite answer for them")
    return spec, res


def _trust_json(tr):
    return None if tr is None else {"share": tr[0], "problems": tr[1]}


@main.command()
@gpu_option
@kernel_option()
@shape_options(RANGES)
@tile_options(RANGES + "; default: the kernel's usual tiles")
@click.option("--best", is_flag=True, help="for each problem, the fastest tile configuration that fits")
@click.option("--csv", "as_csv", is_flag=True, help="every fitting configuration as CSV on stdout")
@json_option
@click.option("--limit", default=40, show_default=True, type=click.IntRange(min=1),
              help="rows in the table (fastest first; with --best, problems in axis order)")
@click.option("-o", "out_path", default=None,
              help="heatmap of predicted time over (Br, Bc) for one problem (one value of B, H, N, d): .png/.svg/.pdf")
@calibration_option
def sweep(gpu_name, kernel, dtype, causal, mode, best, as_csv, as_json, limit, out_path, cal_path, **kw):
    """Predict every combination of the given lists/ranges (e.g. --N 128:8192:x2 --Br 16,32,64)."""
    if as_csv and as_json:
        raise InputError("--csv and --json: choose one")
    if out_path is not None:
        figure_path(out_path)
        if any(len(sw.parse_values(a, kw[a])) > 1 for a in ("B", "H", "Hkv", "N", "Nq", "Nk", "d")
               if kw.get(a) is not None):
            raise InputError("-o draws one problem: give one value each of --B, --H, --N (or --Nq, --Nk) and --d")
    spec, res = _run(gpu_name, kernel, cal_path, dtype, causal, mode, kw)
    dtype = res.prediction.shape.dtype
    n_fit = int(res.fits.sum())
    if n_fit == 0:
        raise InputError(f"none of the {res.size} configurations of the sweep fits {spec.name} "
                         f"({res.why_unfit()})")
    err.print(f"{res.size} configurations ({n_fit} fit {spec.key}) in {res.seconds:.3f} s")
    # made and written as they are read: a 2M-row --csv or --json never holds its rows (docs/cli.md, size limits)
    n_rows, rows = res.listing(best)
    tile_axes = res.tile_axes
    swept = get_kernel(res.kernel)

    def runner(p, second):
        """The runner-up's tile fields that differ from the pick's, and how much slower it is predicted."""
        if second is None:
            return "", None
        q, t2 = second
        return " ".join(f"{a}={q[a]}" for a in tile_axes if q[a] != p[a]), t2

    def trust(t, t2):
        """(share, problems) of the recorded picks at this margin that were the measured fastest, or None."""
        return None if t2 is None else advice.pick_best(swept, t2 / t - 1)
    if out_path:
        from perfmodel import plot

        # time_s is inf where a tile does not fit; other tile fields: the fastest value per (Br, Bc) cell
        n = res.n_shape
        t = res.time_s.reshape(res.time_s.shape[n:n + 2] + (-1,)).min(axis=-1)
        # why the cells where no tile fits do not: the reason of the configuration among them nearest to fitting
        blank = np.broadcast_to(~np.isfinite(t).reshape((1,) * n + t.shape + (1,) * (len(res.axes) - n - 2)),
                                res.time_s.shape)
        s = res.prediction.shape
        problem = (" ".join(f"{a}={res.values[a][0]}" for a in res.shape_axes)
                   + f" ({s.dtype}, {'causal' if s.causal else 'not causal'}{'' if s.mode == 'fwd' else ', ' + s.mode})")
        fig = plot.heatmap(t, res.values["Br"], res.values["Bc"], f"{kernel} on {spec.name}: {problem}",
                           aggregated=[a for a in res.axes[n + 2:] if len(res.values[a]) > 1],
                           unfit=res.why_unfit(mask=blank) if blank.any() else "")
        plot.save(fig, out_path)
        err.print(f"wrote {out_path}")
    cols = list(res.axes) + ["time_s", "bound"]
    if as_csv:
        w = csv.writer(sys.stdout)
        w.writerow(["kernel"] + cols[:res.n_shape] + ["dtype", "causal", "mode"] + cols[res.n_shape:]
                   + (["runner_up", "runner_up_time_s"] if best else []))
        for (p, t, b), second in rows:
            extra = []
            if best:
                what, t2 = runner(p, second)
                extra = [what, "" if t2 is None else f"{t2:.6g}"]
            w.writerow([kernel] + [p[a] for a in res.shape_axes] + [dtype, int(causal), mode]
                       + [p[a] for a in res.tile_axes] + [f"{t:.6g}", b] + extra)
        return
    if as_json:
        doc = {"gpu": spec.key, "kernel": kernel, "dtype": dtype, "causal": causal, "mode": mode,
               "configurations": res.size, "best": best, "ceilings": res.prediction.ceilings.basis, "rows": None,
               **({"pick_measured_best_source": advice.SOURCE} if best else {})}
        items = (dict(p, time_s=t, bound=b, **({"runner_up": None if sec is None else dict(sec[0], time_s=sec[1]),
                                                "pick_measured_best": _trust_json(trust(t, sec and sec[1]))}
                                               if best else {}))
                 for (p, t, b), sec in rows)
        report.write_json(doc, "rows", items, sys.stdout.write)
        sys.stdout.write("\n")
        return
    shown = list(itertools.islice(rows, limit))
    # an axis swept over one value goes into the title, not a column, so the table keeps to the terminal's width
    fixed = [a for a in res.axes if len(res.values[a]) == 1]
    varied = [a for a in res.axes if a not in fixed]
    title = (("fastest tile configuration per problem" if best else "fastest configurations")
             + f" ({len(shown)} of {n_rows})")
    if fixed:
        title += "; " + " ".join(f"{a}={res.values[a][0]}" for a in fixed)
    tab = Table(title=title, title_justify="left", show_edge=False)
    judged = best and bool(advice.pick_table(swept.name))
    for c in varied + ["time_s", "bound"] + (["runner-up", "its margin"] if best else []) + (
            ["pick was best"] if judged else []):
        tab.add_column(c, justify="right")
    for (p, t, b), second in shown:
        extra = []
        if best:
            what, t2 = runner(p, second)
            extra = [what or "-", "-" if t2 is None else f"+{(t2 / t - 1) * 100:.1f}%"]
            if judged:
                tr = trust(t, t2)
                extra.append("-" if tr is None else f"{tr[0]:.0%} of {tr[1]}")
        tab.add_row(*(str(p[a]) for a in varied), report.si(t, "s"), b, *extra)
    out.print(tab)
    if best and any(s is not None for _, s in shown):
        err.print("runner-up: the model's second fastest tiles; where the margin is small, time both (README, tile "
                  "advice)")
    if judged:
        err.print(f"pick was best: of the measured problems at that margin, how often the pick was the fastest of "
                  f"their measured tiles (mostly three); from {advice.SOURCE}")
    if n_rows > len(shown):
        err.print(f"{n_rows - len(shown)} more rows: raise --limit, or use --csv / --json for all")


@main.command()
@gpu_option
@kernel_option()
@click.option("--record", "record_path", default=None, help="also write the result to this JSON file")
@json_option
def bench(gpu_name, kernel, record_path, as_json):
    """Benchmark: configurations per second of a ~1,000,000-configuration sweep (counts + timing)."""
    import datetime
    import os
    import platform

    from perfmodel.kernels import get as get_kernel

    if record_path:
        output_path(record_path)
    spec = api.load_gpu(gpu_name)
    r = sw.benchmark(spec, api.load_calibration(spec), get_kernel(kernel))
    r.update(gpu=spec.key, cpu=platform.processor() or platform.machine(), cores=os.cpu_count(),
             python=platform.python_version(), numpy=np.__version__,
             date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             command=f"perfmodel bench --gpu {gpu_name} --kernel {kernel}")
    if as_json:
        click.echo(report.dumps(r))
    else:
        tab = Table(title="perfmodel bench", title_justify="left", show_edge=False)
        tab.add_column("measure")
        tab.add_column("value", overflow="fold")
        for key, v in r.items():
            tab.add_row(key.replace("_", " "), f"{v:,.0f}" if isinstance(v, float) and v >= 1000 else f"{v:.4g}" if isinstance(v, float) else str(v))
        out.print(tab)
    if record_path:
        from perfmodel.io import write_atomic

        write_atomic(record_path, report.dumps(r) + "\n", "record")


@main.command()
@gpu_option
@kernel_option()
@shape_options(RANGES)
@tile_options(RANGES + "; default: the kernel's default tiles")
@click.option("--measured", "measured_path", default=None, help="measured CSV: matching rows are drawn hollow")
@click.option("-o", "out_path", required=True, help=".png, .svg or .pdf")
@calibration_option
def roofline(gpu_name, kernel, dtype, causal, mode, measured_path, out_path, cal_path, **kw):
    """Hierarchical roofline (DRAM, L2, shared memory, compute) with the kernel at each memory level."""
    from perfmodel import plot
    from perfmodel.evaluation import dataset, figures

    figure_path(out_path)
    spec, res = _run(gpu_name, kernel, cal_path, dtype, causal, mode, kw, explore=False)
    dtype = res.prediction.shape.dtype
    sets = dataset.load([measured_path]) if measured_path else []
    points = figures.roofline_points(res, sets)
    if not points:
        raise InputError(f"no configuration fits {spec.name}" + (f" ({res.why_unfit()})" if res.size else ""))
    if len(points) > MAX_ROOFLINE_POINTS:
        raise InputError(f"{len(points)} configurations: a roofline stays readable with at most "
                         f"{MAX_ROOFLINE_POINTS}; give fewer values")
    for p in res.unfit():
        err.print(f"skipped (does not fit {spec.key}): " + " ".join(f"{a}={v}" for a, v in p.items()))
    shared = " ".join(f"{a}={res.values[a][0]}" for a in res.axes if len(res.values[a]) == 1)
    title = f"{kernel} on {spec.name}: {shared} ({dtype}{', causal' if causal else ''})"
    fig = plot.roofline(res.prediction.ceilings, points, title, dtype)
    plot.save(fig, out_path)
    n_meas = sum(1 for p in points if p["measured_s"])
    err.print(f"wrote {out_path} ({len(points)} configurations" + (f", {n_meas} measured)" if sets else ")"))
