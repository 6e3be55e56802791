"""`perfmodel predict` and `perfmodel gpus`."""

from __future__ import annotations

import click
from rich.table import Table

from perfmodel import api, report
from perfmodel.cli import main
from perfmodel.cli.common import (calibration_option, gpu_option, json_option, kernel_option, out,
                                  lengths_given, shape_options, tile_options, tiles_given)
from perfmodel.errors import InputError
from perfmodel.hw import gpu as gpu_mod


@main.command()
@gpu_option
@kernel_option()
@shape_options("", require_n=True)
@tile_options("")
@click.option("--model", "which", type=click.Choice(["perfmodel", "seed"]), default="perfmodel", show_default=True,
              help="our mechanistic model, or the seed report's baseline")
@calibration_option
@click.option("--regs", default=None, help="registers per thread (default: the kernel's compiled value)")
@json_option
def predict(gpu_name, kernel, which, cal_path, regs, as_json, **kw):
    """Predict one call: counts, per-resource times, the bound, its launches, and the roofline time."""
    tiles = tiles_given(kw)
    lengths_given(kw, require=True)
    if which == "seed":
        from perfmodel.model import seed

        spec = api.load_gpu(gpu_name)
        k, shape, t = api.configure(kernel, **kw, **tiles, gpu=spec)
        if not bool(shape.square) or shape.mode != "fwd":
            raise InputError("--model seed predicts the seed's problem only: the forward, Nq = Nk, Hkv = H")
        params = dict(shape.as_dict(), **{f: getattr(t, f) for f in t.fields()})
        sp = seed.predict(spec, shape.B, shape.H, shape.N, shape.d, t.Br, t.Bc)
        result = report.seed_dict(spec, kernel, params, sp)
    else:
        result = api.predict(gpu_name, kernel, calibration=cal_path, regs=regs, **kw, **tiles).to_dict()
    if as_json:
        click.echo(report.dumps(result))
    else:
        report.render_prediction(out, result)


@main.group(invoke_without_command=True)
@json_option
@click.pass_context
def gpus(ctx, as_json):
    """List the built-in GPU specs (`gpus show NAME` prints one)."""
    if ctx.invoked_subcommand:
        return
    specs = gpu_mod.user_specs()
    if as_json:
        click.echo(report.dumps([{"key": s.key, "name": s.name, "aliases": list(s.aliases), "arch": s.sm,
                                  "sm_count": s.sm_count, "fp32_tflops": s.fp32_tflops,
                                  "dram_bw_gbps": s.dram_bw_gbps, "l2_bytes": s.l2_bytes,
                                  "smem_per_sm_bytes": s.smem_per_sm_bytes} for s in specs]))
        return
    t = Table(show_edge=False)
    # fits 80 columns, names and figures whole: below 120 columns the aliases follow the table, one line each
    wide = out.width >= 120
    for col in ("name", "GPU") + (("aliases",) if wide else ()) + ("arch", "SMs", "FP32\nTFLOP/s", "DRAM\nGB/s",
                                                                    "L2", "smem\n/SM"):
        t.add_column(col, no_wrap=True, justify="left" if col in ("name", "GPU", "aliases", "arch") else "right")
    for s in specs:
        t.add_row(s.key, s.name.removeprefix("NVIDIA "), *([", ".join(s.aliases)] if wide else []), s.sm, str(s.sm_count), f"{s.fp32_tflops:g}",
                  f"{s.dram_bw_gbps:g}", report.binary(s.l2_bytes), report.binary(s.smem_per_sm_bytes))
    out.print(t)
    if not wide:
        out.print("aliases:")
        for s in specs:
            if s.aliases:
                out.print(f"  {s.key}: {', '.join(s.aliases)}", soft_wrap=False)


@gpus.command("show")
@click.argument("name")
@json_option
def gpus_show(name, as_json):
    """Print one GPU spec (a built-in name, alias, or YAML path)."""
    spec = api.load_gpu(name)
    data = spec.to_dict()
    if as_json:
        click.echo(report.dumps(data))
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


def _without_keys(text: str, keys: tuple) -> list[str]:
    """The lines of a YAML mapping without the top-level entries ``keys`` (their continuation lines too: an
    indented value or a block list)."""
    import re

    out, skipping = [], False
    for line in text.splitlines():
        top = line[:1] not in (" ", "\t", "-", "#", "") if line.strip() else False
        if top:
            skipping = re.match(rf"({'|'.join(keys)})\s*:", line) is not None
        if not skipping:
            out.append(line)
    return out


@gpus.command("new")
@click.argument("name")
@click.option("--from", "from_name", required=True, help="a known GPU to start from (its values and sources)")
@click.option("--dir", "folder", default=None,
              help="where to write NAME.yaml (default: the first folder of $PERFMODEL_GPU_PATH, else "
                   "~/.config/perfmodel/gpus)")
@click.option("--force", is_flag=True, help="replace an existing NAME.yaml")
def gpus_new(name, from_name, folder, force):
    """Start a spec of your own from a known one: NAME.yaml in your spec folder, found by name afterwards."""
    import re
    from pathlib import Path

    import yaml

    from perfmodel.errors import read_text
    from perfmodel.io import check_writable, write_atomic

    if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", name) or name.endswith((".yaml", ".yml")):
        raise InputError(f"GPU name '{name}': use lower-case letters, digits, '-', '_' or '.'")
    taken = gpu_mod.builtin_answers(name)
    if taken:
        raise InputError(f"'{name}' already names the built-in GPU {taken}; choose another name")
    src = api.load_gpu(from_name)
    dest_dir = Path(folder) if folder else gpu_mod.user_dirs()[0]
    dest = dest_dir / f"{name}.yaml"
    if (dest.exists() or dest.is_symlink()) and not force:
        raise InputError(f"{dest} exists already; pass --force to replace it")
    header = (f"# {name}: started from {src.key} by `perfmodel gpus new {name} --from {from_name}`.\n"
              f"# Replace every value that differs on your GPU and cite its source under `sources:`;\n"
              f"# `name:` must be the CUDA device name for `perfmodel measure` and `validate` to match it.\n")
    lines = _without_keys(read_text(src.path, "GPU spec file"), ("name", "aliases"))
    quoted = yaml.safe_dump(name, default_style='"').strip().removesuffix("...").strip()
    text = header + f"name: {quoted}\naliases: []\n" + "\n".join(lines) + "\n"
    raw = yaml.safe_load(text)
    spec = gpu_mod.GPUSpec(key=name, path=str(dest), **gpu_mod._check(raw, str(dest)))   # loads, or nothing written
    if spec.name != name:
        raise InputError(f"GPU name '{name}' does not survive as YAML; choose another name")
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {dest_dir}: {exc.strerror or exc}") from None
    if dest.is_symlink():
        dest.unlink()               # --force replaces the link itself, never the file it points to
    check_writable(dest, "GPU spec file")
    write_atomic(dest, text, "GPU spec file")
    click.echo(f"wrote {dest}; `--gpu {name}` finds it")
