"""`perfmodel measure` and `perfmodel probe`: the commands that need a GPU."""

from __future__ import annotations

import time
from pathlib import Path

import click

from perfmodel import api
from perfmodel.cli import main
from perfmodel.cli.common import err, output_path
from perfmodel.errors import InputError
from perfmodel.hw import gpu as gpu_mod


def _device_spec(torch, gpu_name):
    return api.load_gpu(gpu_name) if gpu_name else gpu_mod.match_device_name(torch.cuda.get_device_name())


@main.command()
@click.option("--kernel", default=None, help="kernel to measure (default: the grid file's 'kernel')")
@click.option("--grid", "grid_path", required=True, help="grid YAML (see examples/grids/)")
@click.option("--out", "out_path", required=True, help="CSV to append rows to (a rerun resumes)")
@click.option("--gpu", "gpu_name", default=None, help="spec for the time budget (default: matched by device name)")
@click.option("--budget-ms", default=None, type=float, help="skip configurations predicted above this (default: grid's, else 200)")
@click.option("--no-flush", is_flag=True, help="do not flush L2 before each timed run")
@click.option("--runs", default=10, show_default=True, type=click.IntRange(1, 10_000), help="minimum timed runs per configuration")
@click.option("--max-seconds", default=None, type=click.FloatRange(min=0), help="stop (cleanly, resumable) after this much wall time")
@click.option("--retime-unstable", is_flag=True,
              help="measure again the configurations whose recorded p80/p20 spread marks a disturbed timing "
                   "(the old rows go to NAME.superseded.csv)")
@click.option("--verbose", is_flag=True, help="show the build log")
@click.option("--target-s", default=0.25, show_default=True, type=click.FloatRange(min=0.0),
              help="timed seconds a configuration gets at least (beyond --runs)")
def measure(kernel, grid_path, out_path, gpu_name, budget_ms, no_flush, runs, max_seconds, retime_unstable, verbose,
            target_s):
    """Build, check (float64 reference, poisoned output) and time a bundled kernel over a grid."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from perfmodel.measure import build, grid as grid_mod, runner

    output_path(out_path)
    runner.prepare_output(Path(out_path), note=lambda m: err.print(m))
    runner.prepare_output(Path(out_path).with_suffix(".skipped.csv"), note=lambda m: err.print(m))
    raw = grid_mod.load(grid_path)
    kernel = kernel or raw.get("kernel")
    if not kernel:
        raise InputError("no kernel: pass --kernel or put 'kernel:' in the grid file")
    configs = grid_mod.expand(raw, kernel)
    budget = budget_ms if budget_ms is not None else float(raw.get("budget_ms", 200.0))
    torch = build.require_torch()
    spec = _device_spec(torch, gpu_name)
    if spec is None:
        err.print(f"no built-in spec matches '{torch.cuda.get_device_name()}': no time budget is applied")
    start = time.monotonic()

    class Stop(Exception):
        pass

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task(f"measuring {kernel}", total=len(configs))

        def progress(i, n, cfg):
            bar.update(task, completed=i, description=cfg.label())
            if max_seconds is not None and time.monotonic() - start > max_seconds:
                raise Stop()

        try:
            summary = runner.measure(configs, Path(out_path), spec, flush=not no_flush, budget_ms=budget,
                                     min_runs=runs, progress=progress, verbose=verbose, target_s=target_s,
                                     retime_unstable=retime_unstable)
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

    from perfmodel.measure import build, probe as probe_mod

    output_path(out_path)
    torch = build.require_torch()
    spec = _device_spec(torch, gpu_name)
    if spec is None:
        raise InputError(f"no built-in spec matches '{torch.cuda.get_device_name()}'; pass --gpu FILE.yaml")
    result = probe_mod.run(spec, verbose=verbose, log=lambda m: err.print(m))
    from perfmodel.io import write_atomic

    write_atomic(out_path, f"# perfmodel calibration for {spec.key}, written by `perfmodel probe`.\n"
                 + yaml.safe_dump(result, sort_keys=False), "calibration")
    err.print(f"wrote {out_path}")
