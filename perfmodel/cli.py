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
    import datetime
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
    cal = calibration.dataclasses.replace(cal, path_fits={k: v for k, v in cal.path_fits.items() if k != kernel})
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
