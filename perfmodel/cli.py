"""The command line. Thin: parse, call the model, hand the result to report/plot. Data to stdout, messages to
stderr, exit 2 with one line for bad input."""

from __future__ import annotations

import json
import sys

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from perfmodel import calibration, gpu as gpu_mod, kernels, model, report
from perfmodel.errors import InputError
from perfmodel.problem import make_config

out = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, highlight=False)


class Group(click.Group):
    """A click group whose errors are one line and exit 2, never a traceback."""

    def main(self, args=None, prog_name=None, **kwargs):
        try:
            rv = super().main(args=args, prog_name=prog_name or "perfmodel", standalone_mode=False, **kwargs)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except click.UsageError as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(2)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfmodel")
def main():
    """Predict, measure and validate FlashAttention kernel performance on NVIDIA GPUs."""


def problem_options(f):
    """--B --H --N --d --Br --Bc --threads --pad --dtype, taken as text and validated by make_config."""
    opts = [
        click.option("--threads", default=None, help="threads per block (fa2; fa1 runs Br threads)"),
        click.option("--pad", default=None, type=int, help="words of padding per shared row (fa2, default 1)"),
        click.option("--dtype", default="fp32", show_default=True, help="element type"),
        click.option("--Bc", "Bc", required=True, help="K/V tile rows"),
        click.option("--Br", "Br", required=True, help="Q tile rows"),
        click.option("--d", "d", default="32", show_default=True, help="head dimension"),
        click.option("--N", "N", required=True, help="sequence length"),
        click.option("--H", "H", default="4", show_default=True, help="heads"),
        click.option("--B", "B", default="1", show_default=True, help="batch"),
        click.option("--kernel", default="fa1", show_default=True, help=f"one of {', '.join(kernels.KERNELS)}"),
    ]
    for o in opts:
        f = o(f)
    return f


def gpu_option(f):
    return click.option("--gpu", "gpu_name", required=True, help="built-in name or alias, or a YAML file")(f)


@main.command()
@gpu_option
@problem_options
@click.option("--model", "which", type=click.Choice(["perfmodel", "seed"]), default="perfmodel", show_default=True,
              help="our mechanistic model, or the seed report's baseline")
@click.option("--calibration", "cal_path", default=None, help="calibration YAML (default: the shipped one, if any)")
@click.option("--regs", default=None, type=int, help="registers per thread (default: the kernel's measured value)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def predict(gpu_name, kernel, B, H, N, d, Br, Bc, dtype, pad, threads, which, cal_path, regs, as_json):
    """Predict one kernel launch: counts, per-resource times, the bound, and the roofline time."""
    spec = gpu_mod.resolve(gpu_name)
    cfg = make_config(kernel, B, H, N, d, Br, Bc, threads=threads, pad=pad, dtype=dtype)
    if which == "seed":
        kernels.get(kernel).check(spec, cfg.B, cfg.H, cfg.N, cfg.d, cfg.Br, cfg.Bc, threads=cfg.threads, pad=cfg.pad)
        result = report.seed_dict(spec, cfg, model.predict_seed(spec, cfg))
    else:
        cal = calibration.resolve(spec, cal_path)
        result = report.prediction_dict(spec, cfg, model.predict(spec, cfg, cal, regs=regs), cal)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        report.render_prediction(out, result)


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def gpus(ctx, as_json):
    """List the built-in GPU specs (`gpus show NAME` prints one)."""
    if ctx.invoked_subcommand:
        return
    specs = [gpu_mod.load_spec_file(p) for p in gpu_mod.builtin_specs().values()]
    if as_json:
        click.echo(json.dumps([{"key": s.key, "name": s.name, "aliases": list(s.aliases), "sm_count": s.sm_count,
                                "fp32_tflops": s.fp32_tflops, "dram_bw_gbps": s.dram_bw_gbps} for s in specs],
                              indent=2))
        return
    t = Table(show_edge=False)
    for col in ("name", "GPU", "aliases", "CC", "SMs", "FP32 TFLOP/s", "DRAM GB/s", "L2", "smem/SM"):
        t.add_column(col)
    for s in specs:
        t.add_row(s.key, s.name, ", ".join(s.aliases), s.compute_capability, str(s.sm_count), f"{s.fp32_tflops:g}",
                  f"{s.dram_bw_gbps:g}", report.si(s.l2_bytes, "B"), report.si(s.smem_per_sm_bytes, "B"))
    out.print(t)


@gpus.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
def gpus_show(name, as_json):
    """Print one GPU spec (a built-in name, alias, or YAML path)."""
    spec = gpu_mod.resolve(name)
    data = spec.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    t = Table(title=f"{spec.name} ({spec.path})", title_justify="left", show_edge=False)
    t.add_column("field")
    t.add_column("value")
    for k, v in data.items():
        if k in ("sources", "key", "path") or v is None:
            continue
        t.add_row(k, ", ".join(v) if isinstance(v, tuple) else str(v))
    out.print(t)
    out.print("sources:")
    for s in spec.sources:
        out.print(f"  - {s}")


@main.command()
@click.option("--kernel", default=None, help="kernel to measure (default: the grid file's 'kernel')")
@click.option("--grid", "grid_path", required=True, help="grid YAML (see examples/grids/)")
@click.option("--out", "out_path", required=True, help="CSV to append rows to (a rerun resumes)")
@click.option("--gpu", "gpu_name", default=None, help="spec for the time budget (default: matched by device name)")
@click.option("--budget-ms", default=None, type=float, help="skip configurations predicted above this (default: grid's, else 200)")
@click.option("--no-flush", is_flag=True, help="do not flush L2 before each timed run")
@click.option("--runs", default=10, show_default=True, type=int, help="minimum timed runs per configuration")
@click.option("--max-seconds", default=None, type=float, help="stop (cleanly, resumable) after this much wall time")
@click.option("--verbose", is_flag=True, help="show the build log")
def measure(kernel, grid_path, out_path, gpu_name, budget_ms, no_flush, runs, max_seconds, verbose):
    """Build, check (float64 reference, poisoned output) and time a bundled kernel over a grid."""
    import time
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from perfmodel.measure import grid as grid_mod, runner

    raw = grid_mod.load(grid_path)
    kernel = kernel or raw.get("kernel")
    if not kernel:
        raise InputError("no kernel: pass --kernel or put 'kernel:' in the grid file")
    configs = grid_mod.expand(raw, kernel)
    budget = budget_ms if budget_ms is not None else float(raw.get("budget_ms", 200.0))
    from perfmodel.measure import build
    torch = build.require_torch()
    spec = gpu_mod.resolve(gpu_name) if gpu_name else gpu_mod.match_device_name(torch.cuda.get_device_name())
    if spec is None:
        err.print(f"no built-in spec matches '{torch.cuda.get_device_name()}': no time budget is applied")
    start = time.monotonic()

    class Stop(Exception):
        pass

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task(f"measuring {kernel}", total=len(configs))

        def progress(i, n, cfg):
            bar.update(task, completed=i, description=f"{kernel} N={cfg.N} d={cfg.d} {cfg.Br}x{cfg.Bc}")
            if max_seconds is not None and time.monotonic() - start > max_seconds:
                raise Stop()

        try:
            summary = runner.measure(configs, Path(out_path), spec, flush=not no_flush, budget_ms=budget,
                                     min_runs=runs, progress=progress, verbose=verbose)
        except Stop:
            summary = {"stopped": f"after {max_seconds:g} s; rerun to resume"}
    err.print(f"{out_path}: {summary}")


@main.command()
@click.option("--gpu", "gpu_name", default=None, help="spec of the device (default: matched by device name)")
@click.option("--out", "out_path", required=True, help="calibration YAML to write")
@click.option("--verbose", is_flag=True)
def probe(gpu_name, out_path, verbose):
    """Microbenchmark the current GPU and write a calibration file for predict/validate."""
    import yaml

    from perfmodel import probe as probe_mod
    from perfmodel.measure import build

    torch = build.require_torch()
    spec = gpu_mod.resolve(gpu_name) if gpu_name else gpu_mod.match_device_name(torch.cuda.get_device_name())
    if spec is None:
        raise InputError(f"no built-in spec matches '{torch.cuda.get_device_name()}'; pass --gpu FILE.yaml")
    result = probe_mod.run(spec, verbose=verbose, log=lambda m: err.print(m))
    with open(out_path, "w") as f:
        f.write(f"# perfmodel calibration for {spec.key}, written by `perfmodel probe`.\n")
        yaml.safe_dump(result, f, sort_keys=False)
    err.print(f"wrote {out_path}")


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--gpu", "gpu_name", default=None, help="predict with this spec instead of the one matching each row")
@click.option("--calibration", "cal_path", default=None, help="calibration YAML (default: the shipped one)")
@click.option("--no-calibration", is_flag=True, help="use spec-derived constants only")
@click.option("--no-fits", is_flag=True, help="leave out path costs fitted to kernel timings (probe constants only)")
@click.option("--split", type=click.Choice(["test", "train", "all"]), default="test", show_default=True,
              help="rows to score: held out from fitting (test), the training split, or all")
@click.option("--worst", default=0, show_default=True, help="also list the N worst rows")
@click.option("--json", "as_json", is_flag=True)
def validate(files, gpu_name, cal_path, no_calibration, no_fits, split, worst, as_json):
    """Compare predictions (ours and the seed's) with measured CSV rows."""
    from perfmodel import validate as val

    evals = val.evaluate(val.read_measurements(files, note=lambda m: err.print(m)), gpu_name, cal_path,
                         use_builtin_calibration=not no_calibration, split=split, use_fits=not no_fits)
    summaries = [e.summary() for e in evals]
    if as_json:
        keyed = {}
        for s in summaries:
            key = s["kernel"] if sum(t["kernel"] == s["kernel"] for t in summaries) == 1 else f"{s['kernel']}/{s['gpu']}"
            keyed[key] = s
        click.echo(json.dumps(keyed, indent=2))
        return
    t = Table(title=f"predicted vs measured (absolute percent error), {split} rows", title_justify="left",
              show_edge=False)
    for col in ("kernel", "GPU", "n", "path costs", "MAPE", "median", "worst", "Spearman", "seed MAPE",
                "seed median", "seed worst", "seed Spearman"):
        t.add_column(col, justify="right" if col not in ("kernel", "GPU", "path costs") else "left")
    for s in summaries:
        t.add_row(s["kernel"], s["gpu"], str(s["n"]), "fitted" if s["path_costs_fitted"] else "probe",
                  f"{s['mape']:.1f}%", f"{s['median_ape']:.1f}%",
                  f"{s['max_ape']:.1f}%", f"{s['spearman']:.3f}", f"{s['seed_mape']:.1f}%",
                  f"{s['seed_median_ape']:.1f}%", f"{s['seed_max_ape']:.0f}%", f"{s['seed_spearman']:.3f}")
    out.print(t)
    out.print("Spearman: rank correlation over tile configurations at fixed (B, H, N, d), averaged over groups "
              "of three or more. Path costs: 'probe' = microbenchmark constants only; 'fitted' = the kernel's path "
              "costs were fitted on the training split (perfmodel fit), which 'test' rows exclude.")
    if worst:
        for e in evals:
            order = np.argsort(-e.ape)[:worst]
            w = Table(title=f"worst {worst}: {e.kernel} on {e.gpu}", title_justify="left", show_edge=False)
            for col in ("B", "H", "N", "d", "Br", "Bc", "threads", "pad", "measured", "predicted", "error"):
                w.add_column(col, justify="right")
            for i in order:
                w.add_row(*(str(e.params[k][i]) for k in ("B", "H", "N", "d", "Br", "Bc", "threads", "pad")),
                          report.si(e.measured_s[i], "s"), report.si(e.predicted_s[i], "s"),
                          f"{(e.predicted_s[i] / e.measured_s[i] - 1) * 100:+.1f}%")
            out.print(w)


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--kernel", required=True, help="kernel whose path costs to fit")
@click.option("--gpu", "gpu_name", default=None, help="spec (default: matched by the rows' GPU name)")
@click.option("--calibration", "cal_path", required=True, help="calibration YAML to add the fit to (rewritten)")
def fit(files, kernel, gpu_name, cal_path):
    """Fit a kernel's latency-path costs on the training split of measured rows; store them in a calibration."""
    import dataclasses
    import shlex
    import sys as _sys

    import yaml

    from perfmodel import fit as fit_mod, validate as val

    rows = [r for r in val.read_measurements(files, note=lambda m: err.print(m)) if r["kernel"] == kernel]
    if not rows:
        raise InputError(f"no rows of kernel {kernel} in the given files")
    spec = gpu_mod.resolve(gpu_name) if gpu_name else gpu_mod.match_device_name(rows[0]["gpu_name"])
    if spec is None:
        raise InputError(f"no built-in spec matches '{rows[0]['gpu_name']}'; pass --gpu")
    cal = calibration.load(cal_path, spec)
    cal = dataclasses.replace(cal, path_fits={k: v for k, v in cal.path_fits.items() if k != kernel})
    result = fit_mod.fit_path(spec, cal, kernel, rows)
    result["training"]["data"] = sorted({r["_file"] for r in rows})
    result["training"]["command"] = " ".join(["perfmodel"] + [shlex.quote(a) for a in _sys.argv[1:]])
    with open(cal_path) as f:
        text = f.read()
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    raw = yaml.safe_load(text)
    raw.setdefault("path_fits", {})[kernel] = result
    with open(cal_path, "w") as f:
        f.write(header)
        yaml.safe_dump(raw, f, sort_keys=False)
    err.print(f"{kernel}: {result['training']['rows']} training rows, MAPE on them "
              f"{result['training']['mape_on_training_rows']:.1f}%; costs {', '.join(f'{k}={v:.3g}' for k, v in result['costs'].items())}")
    err.print(f"wrote path_fits.{kernel} into {cal_path}; score it with: perfmodel validate FILE.csv (held-out rows)")


FIGURE_EXTS = (".png", ".svg", ".pdf")


def _figure_path(path: str) -> str:
    from pathlib import Path

    if Path(path).suffix.lower() not in FIGURE_EXTS:
        raise InputError(f"output '{path}': use a .png, .svg or .pdf file name")
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise InputError(f"output '{path}': folder {parent} does not exist")
    return path


def sweep_options(f):
    opts = [
        click.option("--pad", "pad", default=None, help="padding words (fa2): list or range"),
        click.option("--threads", "threads", default=None, help="threads per block (fa2): list or range"),
        click.option("--Bc", "Bc", default="16,32,64,128", show_default=True),
        click.option("--Br", "Br", default="16,32,64,128", show_default=True),
        click.option("--d", "d", default="32", show_default=True),
        click.option("--N", "N", default="512", show_default=True),
        click.option("--H", "H", default="4", show_default=True),
        click.option("--B", "B", default="1", show_default=True),
        click.option("--kernel", default="fa1", show_default=True),
    ]
    for o in opts:
        f = o(f)
    return f


def _sweep_values(B, H, N, d, Br, Bc, threads, pad):
    from perfmodel import sweep as sw

    vals = {"B": B, "H": H, "N": N, "d": d, "Br": Br, "Bc": Bc, "threads": threads, "pad": pad}
    return {k: (None if v is None else sw.parse_values(k, v)) for k, v in vals.items()}


@main.command()
@gpu_option
@sweep_options
@click.option("--best", is_flag=True, help="for each problem, the fastest tile configuration that fits")
@click.option("--csv", "as_csv", is_flag=True, help="every fitting configuration as CSV on stdout")
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", default=40, show_default=True, help="rows in the table (fastest first)")
@click.option("-o", "out_path", default=None, help="heatmap of predicted time over (Br, Bc): .png/.svg/.pdf")
@click.option("--calibration", "cal_path", default=None)
def sweep(gpu_name, kernel, B, H, N, d, Br, Bc, threads, pad, best, as_csv, as_json, limit, out_path, cal_path):
    """Predict every combination of the given lists/ranges (e.g. --N 128:8192:x2 --Br 16,32,64)."""
    import csv as csv_mod
    import sys

    from perfmodel import sweep as sw

    if out_path:
        _figure_path(out_path)
    spec = gpu_mod.resolve(gpu_name)
    cal = calibration.resolve(spec, cal_path)
    values = _sweep_values(B, H, N, d, Br, Bc, threads, pad)
    res = sw.run(spec, kernel, cal, values)
    err.print(f"{res.size} configurations ({int(res.fits.sum())} fit {spec.key}) in {res.seconds:.3f} s")
    rows = res.best() if best else sorted(res.rows(), key=lambda r: r[1])
    if out_path:
        # one problem (the first), the best threads/pad for each (Br, Bc); time_s is inf where a tile does not fit
        sub = res.time_s[0, 0, 0, 0].min(axis=(2, 3))
        p0 = {a: res.values[a][0] for a in ("B", "H", "N", "d")}
        from perfmodel import plot
        fig = plot.heatmap(sub, res.values["Br"], res.values["Bc"],
                           f"{kernel} on {spec.name}: B={p0['B']} H={p0['H']} N={p0['N']} d={p0['d']}")
        plot.save(fig, out_path)
        err.print(f"wrote {out_path}")
    cols = list(sw.AXES) + ["time_s", "bound"]
    if as_csv:
        w = csv_mod.writer(sys.stdout)
        w.writerow(["kernel"] + cols)
        for p, t, b in rows:
            w.writerow([kernel] + [p[a] for a in sw.AXES] + [f"{t:.6g}", b])
        return
    if as_json:
        click.echo(json.dumps({"gpu": spec.key, "kernel": kernel, "configurations": res.size, "best": best,
                               "rows": [dict(p, time_s=t, bound=b) for p, t, b in rows]}, indent=1))
        return
    tab = Table(title=("fastest tile configuration per problem" if best else f"fastest {limit} configurations"),
                title_justify="left", show_edge=False)
    for c in cols:
        tab.add_column(c, justify="right")
    for p, t, b in rows[: (None if best else limit)]:
        tab.add_row(*(str(p[a]) for a in sw.AXES), report.si(t, "s"), b)
    out.print(tab)


@main.command()
@gpu_option
@click.option("--kernel", default="fa2", show_default=True)
@click.option("--record", "record_path", default=None, help="also write the result to this JSON file")
def bench(gpu_name, kernel, record_path):
    """Benchmark: configurations per second of a ~1,000,000-configuration sweep (counts + timing)."""
    import datetime
    import os
    import platform

    from perfmodel import sweep as sw

    spec = gpu_mod.resolve(gpu_name)
    r = sw.benchmark(spec, calibration.resolve(spec), kernel)
    r.update(gpu=spec.key, cpu=platform.processor() or platform.machine(), cores=os.cpu_count(),
             python=platform.python_version(), numpy=np.__version__,
             date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             command=f"perfmodel bench --gpu {gpu_name} --kernel {kernel}")
    click.echo(json.dumps(r, indent=2))
    if record_path:
        with open(record_path, "w") as f:
            json.dump(r, f, indent=2)
            f.write("\n")


@main.command()
@gpu_option
@sweep_options
@click.option("--measured", "measured_path", default=None, help="measured CSV: matching rows are drawn hollow")
@click.option("-o", "out_path", required=True, help=".png, .svg or .pdf")
@click.option("--calibration", "cal_path", default=None)
def roofline(gpu_name, kernel, B, H, N, d, Br, Bc, threads, pad, measured_path, out_path, cal_path):
    """Hierarchical roofline (DRAM, L2, shared memory, FP32) with the kernel at each memory level."""
    from perfmodel import plot, validate as val

    _figure_path(out_path)
    spec = gpu_mod.resolve(gpu_name)
    cal = calibration.resolve(spec, cal_path)
    values = _sweep_values(B, H, N, d, Br, Bc, threads, pad)
    rows = val.read_measurements([measured_path]) if measured_path else []
    points, skipped = report.roofline_points(spec, cal, kernel, values, rows)
    for cfg in skipped:
        err.print(f"skipped (does not fit {spec.key}): Br={cfg.Br} Bc={cfg.Bc} d={cfg.d}")
    if not points:
        raise InputError("no configuration fits this GPU")
    if len(points) > 12:
        raise InputError(f"{len(points)} configurations: a roofline stays readable with at most 12")
    shared = " ".join(f"{a}={values[a][0]}" for a in ("B", "H", "N", "d", "Br", "Bc")
                      if values[a] and len(values[a]) == 1)
    title = f"{kernel} on {spec.name}: {shared} (fp32)"
    fig = plot.roofline(spec, points, title, tensor_flops=None)
    plot.save(fig, out_path)
    n_meas = sum(1 for p in points if p["measured_s"])
    err.print(f"wrote {out_path} ({len(points)} configurations" + (f", {n_meas} measured)" if rows else ")"))


@main.group()
def plot():
    """Figures from measured data: validation scatter, scaling."""


@plot.command("validation")
@click.argument("files", nargs=-1, required=True)
@click.option("-o", "out_path", required=True)
@click.option("--split", type=click.Choice(["test", "train", "all"]), default="test", show_default=True)
def plot_validation(files, out_path, split):
    """Predicted vs measured (ours and the seed's), y = x and ±10% bands, one colour per kernel."""
    from perfmodel import plot as plot_mod, validate as val

    _figure_path(out_path)
    evals = val.evaluate(val.read_measurements(files, note=lambda m: err.print(m)), split=split)
    series = []
    for e in evals:
        s = e.summary()
        series.append({"label": f"{e.kernel} perfmodel (MAPE {s['mape']:.1f}%)", "measured_s": e.measured_s,
                       "predicted_s": e.predicted_s})
        series.append({"label": f"{e.kernel} seed model (MAPE {s['seed_mape']:.0f}%)", "measured_s": e.measured_s,
                       "predicted_s": e.seed_s, "seed": True})
    gpus_ = ", ".join(sorted({e.gpu for e in evals}))
    fig = plot_mod.validation(series, f"predicted vs measured on {gpus_} ({split} rows)")
    plot_mod.save(fig, out_path)
    err.print(f"wrote {out_path}")


@plot.command("scaling")
@click.argument("file")
@click.option("--kernel", default="fa1", show_default=True)
@click.option("--B", "B", default=1, show_default=True)
@click.option("--H", "H", default=4, show_default=True)
@click.option("--d", "d", default=32, show_default=True)
@click.option("--Br", "Br", default=32, show_default=True, help="tiles of the time-vs-N panel")
@click.option("--Bc", "Bc", default=32, show_default=True)
@click.option("--N", "N", default=512, show_default=True, help="N of the time-vs-tiles panel")
@click.option("-o", "out_path", required=True)
def plot_scaling(file, kernel, B, H, d, Br, Bc, N, out_path):
    """Seed 000's two figures: time vs N at fixed tiles, and time vs tiles at fixed N; model, seed, measured."""
    from perfmodel import plot as plot_mod, validate as val

    _figure_path(out_path)
    rows = [r for r in val.read_measurements([file], note=lambda m: err.print(m)) if r["kernel"] == kernel
            and (int(r["B"]), int(r["H"]), int(r["d"])) == (B, H, d)]
    if not rows:
        raise InputError(f"no {kernel} rows with B={B} H={H} d={d} in {file}")
    spec = gpu_mod.match_device_name(rows[0]["gpu_name"])
    if spec is None:
        raise InputError(f"no built-in spec matches '{rows[0]['gpu_name']}'")
    n_panel, t_panel = report.scaling_panels(spec, calibration.resolve(spec), kernel, rows, B, H, d, Br, Bc, N)
    fig = plot_mod.scaling(n_panel, t_panel, f"{kernel} on {spec.name}, B={B} H={H} d={d}")
    plot_mod.save(fig, out_path)
    err.print(f"wrote {out_path}")
