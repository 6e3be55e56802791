"""Options and helpers shared by the commands."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from perfmodel.errors import InputError
from perfmodel.kernels import DEFAULT, names as kernel_names
from perfmodel.shape import DEFAULT_SIZES

out = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)

TILE_OPTIONS = ("Br", "Bc", "threads", "pad", "warps")
FIGURE_EXTS = (".png", ".svg", ".pdf")


def gpu_option(f):
    return click.option("--gpu", "gpu_name", required=True,
                        help="built-in name or alias (see `perfmodel gpus`), or a spec YAML file")(f)


def kernel_option(default=DEFAULT):
    return click.option("--kernel", default=default, show_default=True,
                        help=f"kernel model: {', '.join(kernel_names())}")


def calibration_option(f):
    return click.option("--calibration", "cal_path", default=None,
                        help="calibration YAML (default: the GPU's shipped one, if any)")(f)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="print one JSON object")(f)


def shape_options(sizes_help: str, require_n: bool = False):
    """--B --H --N --d (text: one value, or lists/ranges where the command sweeps) and --dtype --causal."""
    defaults = {a: str(v) for a, v in DEFAULT_SIZES.items()}
    if require_n:
        defaults["N"] = None

    def deco(f):
        opts = [
            click.option("--causal", is_flag=True, help="causal masking (kernels that support it)"),
            click.option("--dtype", default=None,
                         help="element type: fp32, fp16, bf16  [default: the kernel's first: fp32 for fa1 and fa2, "
                              "fp16 for the tensor-core kernels]"),
            click.option("--d", "d", default=defaults["d"], show_default=True, help=f"head dimension{sizes_help}"),
            # (no default at all where --N is required: click 8.3+ takes an explicit default=None as given)
            click.option("--N", "N", help=f"sequence length{sizes_help}",
                         **(dict(required=True) if defaults["N"] is None
                            else dict(default=defaults["N"], show_default=True))),
            click.option("--H", "H", default=defaults["H"], show_default=True, help=f"heads{sizes_help}"),
            click.option("--B", "B", default=defaults["B"], show_default=True, help=f"batch{sizes_help}"),
        ]
        for o in opts:
            f = o(f)
        return f
    return deco


def tile_options(sizes_help: str, br_bc_default=None):
    def deco(f):
        opts = [
            click.option("--warps", "warps", default=None, help=f"warps per block (fa2_tc){sizes_help}"),
            click.option("--pad", "pad", default=None, help=f"words of padding per shared row (fa2; default 1){sizes_help}"),
            click.option("--threads", "threads", default=None,
                         help=f"threads per block (fa2; default 128){sizes_help}"),
            click.option("--Bc", "Bc", default=br_bc_default, show_default=br_bc_default is not None,
                         help=f"K/V tile rows{sizes_help}"),
            click.option("--Br", "Br", default=br_bc_default, show_default=br_bc_default is not None,
                         help=f"Q tile rows{sizes_help}"),
        ]
        for o in opts:
            f = o(f)
        return f
    return deco


def tiles_given(kw: dict) -> dict:
    return {k: kw.pop(k) for k in TILE_OPTIONS if k in kw}


def figure_path(path: str) -> str:
    """Checked before any work: a .png/.svg/.pdf name in an existing, writable folder."""
    p = Path(path)
    if not path or p.suffix.lower() not in FIGURE_EXTS:
        raise InputError(f"output '{path}': use a .png, .svg or .pdf file name")
    return output_path(path)


def output_path(path: str) -> str:
    import os

    p = Path(path)
    if p.is_dir():
        raise InputError(f"output '{path}' is a folder")
    parent = p.resolve().parent
    if not parent.is_dir():
        raise InputError(f"output '{path}': folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"output '{path}': not writable")
    return path
