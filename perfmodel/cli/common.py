"""Options and helpers shared by the commands."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from perfmodel.errors import InputError
from perfmodel.kernels import DEFAULT, names as kernel_names
from perfmodel.shape import DEFAULT_SIZES, MODES

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
PIPED_WIDTH = 80


def _width(stream) -> int:
    """Columns for tables: $COLUMNS where set (a terminal's own width otherwise), else 80 when not a terminal."""
    import os
    import shutil

    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and 20 <= int(cols) <= 1000:
        return int(cols)
    try:
        if stream.isatty():
            return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns
    except (AttributeError, ValueError, OSError):
        pass
    return PIPED_WIDTH


def set_widths() -> None:
    """Called by the entry point on each run (the environment may differ between runs in one process)."""
    out.width = _width(sys.stdout)
    err.width = max(_width(sys.stderr), 200) if not _isatty(sys.stderr) else _width(sys.stderr)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

TILE_OPTIONS = ("Br", "Bc", "threads", "pad", "warps", "splits")
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


CAUSAL_HELP = ("causal masking (kernels that support it); with Nq != Nk aligned bottom-right: query i sees keys up "
               "to i + Nk - Nq, as FlashAttention >= 2.1 and PyTorch's causal_lower_right")


def shape_options(sizes_help: str, require_n: bool = False):
    """The problem: --B/--batch --H/--heads --Hkv/--kv-heads --N --Nq/--q-len --Nk/--kv-len --d/--head-dim (text:
    one value, or lists/ranges where the command sweeps), --dtype, --causal and --mode. ``require_n``: no default
    length (the command then needs --N, or --Nq and --Nk)."""
    defaults = {a: str(v) for a, v in DEFAULT_SIZES.items()}

    def deco(f):
        opts = [
            click.option("--mode", default="fwd", show_default=True, type=click.Choice(MODES),
                         help="the pass: forward, backward, or both (a training step's attention)"),
            click.option("--causal", is_flag=True, help=CAUSAL_HELP),
            click.option("--dtype", default=None,
                         help="element type: fp32, fp16, bf16  [default: the kernel's first: fp32 for fa1 and fa2, "
                              "fp16 for the tensor-core kernels]"),
            click.option("--d", "--head-dim", "d", default=defaults["d"], show_default=True,
                         help=f"head dimension{sizes_help}"),
            click.option("--Nk", "--kv-len", "Nk", default=None, help=f"keys (KV length; default N){sizes_help}"),
            click.option("--Nq", "--q-len", "Nq", default=None, help=f"queries (default N){sizes_help}"),
            click.option("--N", "N", default=None,
                         help=f"sequence length: queries and keys{sizes_help}"
                              + ("" if require_n else f"  [default: {defaults['N']}]")),
            click.option("--Hkv", "--kv-heads", "Hkv", default=None,
                         help=f"K/V heads (grouped-query attention; default H){sizes_help}"),
            click.option("--H", "--heads", "H", default=defaults["H"], show_default=True,
                         help=f"query heads{sizes_help}"),
            click.option("--B", "--batch", "B", default=defaults["B"], show_default=True, help=f"batch{sizes_help}"),
        ]
        for o in opts:
            f = o(f)
        return f
    return deco


def lengths_given(kw: dict, require: bool) -> None:
    """Fills kw's N with its default where no length is given, or where ``require`` says one line of what to give."""
    if kw.get("N") is None and kw.get("Nq") is None and kw.get("Nk") is None:
        if require:
            raise InputError("give the sequence length: --N, or --Nq (queries) and --Nk (keys)")
        kw["N"] = str(DEFAULT_SIZES["N"])
    elif kw.get("N") is None and (kw.get("Nq") is None or kw.get("Nk") is None):
        given = "--Nq" if kw.get("Nq") is not None else "--Nk"
        raise InputError(f"{given} alone leaves the other length open: give --N too, or both --Nq and --Nk")


def tile_options(sizes_help: str, br_bc_default=None):
    def deco(f):
        opts = [
            click.option("--splits", "splits", default=None,
                         help=f"split-KV blocks per query tile (fa2_tc; default: FlashAttention-2's heuristic)"
                              f"{sizes_help}"),
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
    """Checked before any work: one line for a folder, a special file, a missing or read-only folder, a name
    too long."""
    from perfmodel.io import check_writable

    check_writable(path)
    return path
