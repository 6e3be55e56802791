"""`perfmodel plot validation` and `perfmodel plot scaling`: figures from measured data."""

from __future__ import annotations

import click

from perfmodel import api
from perfmodel.cli import main
from perfmodel.cli.common import err, figure_path
from perfmodel.errors import InputError
from perfmodel.evaluation import dataset, validate as val


@main.group()
def plot():
    """Figures from measured data: validation scatter, scaling."""


@plot.command("validation")
@click.argument("files", nargs=-1, required=True)
@click.option("-o", "out_path", required=True, help=".png, .svg or .pdf")
@click.option("--split", type=click.Choice(val.SPLITS), default="test", show_default=True)
def plot_validation(files, out_path, split):
    """Predicted against measured: ours, our error in percent, and the seed model's on axes of its own."""
    from perfmodel import plot as plot_mod

    figure_path(out_path)
    evals = val.evaluate(dataset.load(files, note=lambda m: err.print(m)), split=split)
    groups = []
    for e in evals:
        s = e.summary()
        groups.append({"label": f"{e.kernel} on {e.gpu}", "gpu": e.gpu, "measured_s": e.measured_s,
                       "predicted_s": e.predicted_s, "seed_s": e.seed_s, "mape": s["mape"],
                       "seed_mape": s["seed_mape"]})
    gpus_ = ", ".join(sorted({e.gpu for e in evals}))
    fig = plot_mod.validation(groups, f"predicted against measured on {gpus_} ({split} rows)")
    plot_mod.save(fig, out_path)
    err.print(f"wrote {out_path}")


@plot.command("scaling")
@click.argument("file")
@click.option("--kernel", default=None, help="kernel whose rows to draw (default: the file's, where it holds one)")
@click.option("--B", "B", default=1, show_default=True, type=click.IntRange(min=1), help="batch")
@click.option("--H", "H", default=4, show_default=True, type=click.IntRange(min=1), help="heads")
@click.option("--d", "d", default=32, show_default=True, type=click.IntRange(min=1), help="head dimension")
@click.option("--Br", "Br", default=32, show_default=True, type=click.IntRange(min=1), help="tiles of the time-vs-N panel")
@click.option("--Bc", "Bc", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--N", "N", default=512, show_default=True, type=click.IntRange(min=1), help="N of the time-vs-tiles panel")
@click.option("-o", "out_path", required=True, help=".png, .svg or .pdf")
def plot_scaling(file, kernel, B, H, d, Br, Bc, N, out_path):
    """Seed 000's two figures: time vs N at fixed tiles, and time vs tiles at fixed N; model, seed, measured."""
    from perfmodel import plot as plot_mod
    from perfmodel.evaluation import figures
    from perfmodel.hw import gpu as gpu_mod

    figure_path(out_path)
    loaded = dataset.load([file], note=lambda m: err.print(m))
    if kernel is None:
        kernels = sorted({s.kernel for s in loaded})
        if len(kernels) != 1:
            raise InputError(f"{file} holds rows of {', '.join(kernels) or 'no kernel'}: choose one with --kernel")
        kernel = kernels[0]
    sets = [s for s in loaded if s.kernel == kernel]
    if not sets:
        raise InputError(f"no {kernel} rows in {file}")
    ms = sets[0]
    spec = gpu_mod.match_device_name(ms.gpu_name)
    if spec is None:
        raise InputError(f"no built-in spec matches '{ms.gpu_name}'")
    n_panel, t_panel = figures.scaling_panels(spec, api.load_calibration(spec), ms, B, H, d, Br, Bc, N)
    fig = plot_mod.scaling(n_panel, t_panel, f"{kernel} on {spec.name}, B={B} H={H} d={d}")
    plot_mod.save(fig, out_path)
    err.print(f"wrote {out_path}")
