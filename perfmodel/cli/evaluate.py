"""`perfmodel validate` and `perfmodel fit`: the model against measured rows."""

from __future__ import annotations

import shlex
import sys

import click
import numpy as np
from rich.table import Table

from perfmodel import report
from perfmodel.cli import main
from perfmodel.cli.common import err, json_option, out
from perfmodel.errors import InputError
from perfmodel.evaluation import dataset
from perfmodel.evaluation import validate as val
from perfmodel.shape import AXES


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--gpu", "gpu_name", default=None, help="predict with this spec instead of the one matching each row")
@click.option("--calibration", "cal_path", default=None, help="calibration YAML (default: the shipped one)")
@click.option("--no-calibration", is_flag=True, help="use spec-derived constants only")
@click.option("--no-fits", is_flag=True, help="leave out path costs fitted to kernel timings (probe constants only)")
@click.option("--split", type=click.Choice(val.SPLITS), default="test", show_default=True,
              help="rows to score: held out from fitting (test), the training split, or all")
@click.option("--worst", default=0, show_default=True, type=click.IntRange(min=0), help="also list the N worst rows")
@click.option("--baselines", is_flag=True, help="also the seed model's and a plain roofline's errors (wide table)")
@json_option
def validate(files, gpu_name, cal_path, no_calibration, no_fits, split, worst, baselines, as_json):
    """Compare predictions (ours and the seed's) with measured CSV rows."""
    sets = dataset.load(files, note=lambda m: err.print(m))
    evals = val.evaluate(sets, gpu_name, cal_path, use_builtin_calibration=not no_calibration, split=split,
                         use_fits=not no_fits)
    summaries = [e.summary() for e in evals]
    if as_json:
        # one key per group, never one over another: the kernel; kernel/GPU where a kernel comes from several
        # GPUs; and the measurement files where those still collide (two GPUs' rows predicted on one --gpu)
        keyed = {}
        for s in summaries:
            key = s["kernel"] if sum(t["kernel"] == s["kernel"] for t in summaries) == 1 else f"{s['kernel']}/{s['gpu']}"
            if sum(f"{t['kernel']}/{t['gpu']}" == f"{s['kernel']}/{s['gpu']}" for t in summaries) > 1:
                key = f"{key} ({', '.join(s['files'])})"
            while key in keyed:
                key += "'"
            keyed[key] = s
        click.echo(report.dumps(keyed))
        return
    t = Table(title=f"predicted vs measured (absolute percent error), {split} rows", title_justify="left",
              show_edge=False)
    base = Table(title="baselines on the same rows: the seed model and a plain roofline", title_justify="left",
                 show_edge=False)
    for table, cols in ((t, ["kernel", "GPU", "n", "path costs", "MAPE", "median", "worst", "Spearman"]),
                        (base, ["kernel", "GPU", "seed MAPE", "seed worst", "roof MAPE", "roof worst"])):
        for col in cols:
            table.add_column(col, justify="right" if col not in ("kernel", "GPU", "path costs") else "left",
                             no_wrap=True)
    fmt = lambda v, f: "—" if v is None or not np.isfinite(v) else format(v, f)
    for s in summaries:
        row = [s["kernel"], s["gpu"], str(s["n"]), "fitted" if s["path_costs_fitted"] else "probe",
               report.error_pct(s["mape"]), report.error_pct(s["median_ape"]), report.error_pct(s["max_ape"]),
               fmt(s["spearman"], ".3f")]
        t.add_row(*row)
        base.add_row(s["kernel"], s["gpu"], report.error_pct(s["seed_mape"]), report.error_pct(s["seed_max_ape"]),
                     report.error_pct(s["roofline_mape"]), report.error_pct(s["roofline_max_ape"]))
    out.print(t)
    if baselines:
        out.print(base)
    out.print("Spearman: rank correlation over tile configurations at fixed (B, H, N, d), averaged over groups "
              "of three or more. Path costs: 'probe' = microbenchmark constants only; 'fitted' = the kernel's path "
              "costs were fitted on the training split (perfmodel fit), which 'test' rows exclude."
              + (" Roofline: max(FLOPs / the datasheet's dense peak of the dtype (tensor cores for fp16/bf16), "
                 "DRAM bytes / bandwidth). An error of 1000% or more is printed as the ratio it is (predicted / "
                 "measured)." if baselines else " --baselines adds the seed model's and a roofline's errors."))
    for e in evals[: len(evals) if worst else 0]:
        order = np.argsort(-e.ape)[:worst]
        w = Table(title=f"worst {len(order)}: {e.kernel} on {e.gpu}", title_justify="left", show_edge=False)
        cols = AXES + ("Br", "Bc", "threads", "pad")
        for col in cols + ("measured", "predicted", "error"):
            w.add_column(col, justify="right")
        for i in order:
            w.add_row(*(str(e.params[k][i]) for k in cols), report.si(e.measured_s[i], "s"),
                      report.si(e.predicted_s[i], "s"), f"{(e.predicted_s[i] / e.measured_s[i] - 1) * 100:+.1f}%")
        out.print(w)


def _rewrite_calibration(cal_path, kernel: str, entry: dict) -> None:
    """Set ``path_fits.<kernel>`` in a calibration YAML: only that entry's lines change (every comment and every
    other value stays as written), and the file is replaced atomically (perfmodel.io.write_atomic), so a full disk
    or a size limit leaves it whole."""
    from perfmodel.errors import read_text, read_yaml
    from perfmodel.io import set_yaml_entry, write_atomic

    text = read_text(cal_path, "calibration file")
    raw = read_yaml(cal_path, "calibration file")
    if not isinstance(raw, dict) or not isinstance(raw.get("path_fits") or {}, dict):
        raise InputError(f"{cal_path}: not a calibration file with a 'path_fits' mapping")
    try:
        new = set_yaml_entry(text, "path_fits", kernel, entry)
    except InputError as exc:
        raise InputError(f"{cal_path}: {exc}") from None
    write_atomic(cal_path, new, "calibration file")


def _command() -> str:
    return " ".join(["perfmodel"] + [shlex.quote(a) for a in sys.argv[1:]])


@main.command()
@click.argument("files", nargs=-1)
@click.option("--kernel", required=True, help="kernel whose path costs to fit (or to carry over)")
@click.option("--gpu", "gpu_name", default=None, help="spec (default: matched by the rows' GPU name)")
@click.option("--calibration", "cal_path", required=True, help="calibration YAML to add the fit to (rewritten)")
@click.option("--from", "from_path", default=None,
              help="carry the kernel's fitted path costs over from this calibration (same SM) instead of fitting")
@click.option("--ranking-share", default=0.0, show_default=True, type=click.FloatRange(0, 1, max_open=True),
              help="share of the fit's weight on the time ratios of tiles of one problem (their ranking)")
@click.option("--after-only", is_flag=True,
              help="fit only what the kernel fits after its path costs (fa2_tc: the age-ordered tail), the "
                   "calibration's fitted costs held")
@click.option("--mode", type=click.Choice(["fwd", "bwd"]), default="fwd", show_default=True,
              help="the pass whose rows to fit: a backward's costs are stored apart (path_fits.KERNEL:bwd)")
def fit(files, kernel, gpu_name, cal_path, from_path, ranking_share, after_only, mode):
    """Fit a kernel's latency-path costs on the training split of measured rows, or carry them over from another
    GPU's calibration with --from; store them in a calibration file."""
    from perfmodel import api
    from perfmodel.evaluation import fit as fit_mod
    from perfmodel.hw import calibration, gpu as gpu_mod
    from perfmodel.kernels import get as get_kernel

    get_kernel(kernel)
    kernel_rows, kernel = kernel, kernel if mode == "fwd" else f"{kernel}:{mode}"     # the path_fits entry
    if from_path:
        if files or after_only:
            raise InputError("--from carries costs over; it takes no measurement files and no --after-only")
        from perfmodel.errors import read_yaml
        src = read_yaml(from_path, "calibration file")
        fits = src.get("path_fits") if isinstance(src, dict) else None
        entry = fits.get(kernel) if isinstance(fits, dict) else None
        if not isinstance(entry, dict):
            raise InputError(f"{from_path} has no fitted path costs for {kernel}")
        calibration._costs(from_path, f"path_fits.{kernel}.costs", entry.get("costs"))   # finite, known features
        entry = dict(entry, carried_over={"from": str(from_path), "command": _command()})
        _rewrite_calibration(cal_path, kernel, entry)
        err.print(f"carried path_fits.{kernel} from {from_path} into {cal_path}")
        return
    if not files:
        raise InputError("give measurement CSV files to fit on (or --from CAL.yaml)")
    sets = [s for s in dataset.load(files, note=lambda m: err.print(m)) if s.kernel == kernel_rows]
    if not sets:
        raise InputError(f"no rows of kernel {kernel_rows} in the given files")
    if len(sets) > 1:
        raise InputError(f"rows of {kernel_rows} from several GPUs ({', '.join(s.gpu_name for s in sets)}); fit one "
                         f"GPU")
    ms = sets[0].select(sets[0].mode == mode)
    if not len(ms):
        raise InputError(f"no {mode} rows of kernel {kernel_rows} in the given files")
    spec = api.load_gpu(gpu_name) if gpu_name else gpu_mod.match_device_name(ms.gpu_name)
    if spec is None:
        raise InputError(f"no built-in spec matches '{ms.gpu_name}'; pass --gpu")
    cal = calibration.load(cal_path, spec)
    if after_only:
        held = cal.path_fits.get(kernel)
        if not isinstance(held, dict) or "carried_over" in held or "carried_from" in held:
            raise InputError(f"{cal_path} holds no path costs of {kernel} fitted on its own rows to hold; run "
                             f"`perfmodel fit` without --after-only first")
        result = fit_mod.fit_path(spec, cal, ms, ranking_share=ranking_share, hold=True)
        after = dict(result["training"]["fitted_after"], data=list(ms.files), command=_command())
        result = {"costs": result["costs"], "training": {**held.get("training", {}), "fitted_after": after}}
    else:
        import dataclasses
        cal = dataclasses.replace(cal, path_fits={k: v for k, v in cal.path_fits.items() if k != kernel})
        result = fit_mod.fit_path(spec, cal, ms, ranking_share=ranking_share)
        result["training"]["data"] = list(ms.files)
        result["training"]["command"] = _command()
    _rewrite_calibration(cal_path, kernel, result)
    t = result["training"]
    fitted = t.get("fitted_after", t)
    # past fit.MAX_FIT_ROWS the least squares fit a sample of whole problems: said here and in the calibration
    taken = (f" (the least squares fitted {fitted['rows_fitted']} of them, whole problems: rows_fitted_rule)"
             if "rows_fitted" in fitted else "")
    err.print(f"{kernel}: {t['rows']} training rows, MAPE on them {fitted['mape_on_training_rows']:.1f}%{taken}; costs "
              + ", ".join(f"{k}={v:.3g}" for k, v in result["costs"].items()))
    err.print(f"wrote path_fits.{kernel} into {cal_path}; score it with: perfmodel validate FILE.csv (held-out rows)")
