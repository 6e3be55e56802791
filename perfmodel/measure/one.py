"""Run one configuration once (for profilers): ``python -m perfmodel.measure.one --kernel fa2 N=512 d=32 ...``.
``--list GRID.yaml`` prints the grid's configurations as argument lines instead; ``--run-grid GRID.yaml`` runs
every one of them once, in that order, in this one process (one checked launch each, so a profiler that records
every launch of the kernel sees them in the order ``--list`` prints; the first failure stops the run, so the
launches recorded before it still line up with the list)."""

from __future__ import annotations

import argparse
import sys

from perfmodel.kernels import get as get_kernel
from perfmodel.shape import AXES, make_shape


def _args(c) -> str:
    """The argument line of a configuration: N where the lengths agree and no Hkv or mode where they are the
    defaults, so that a plain problem's line reads as before."""
    s, t = c.shape, c.tiles
    axes = [x for x in AXES if not (x == "Hkv" and s.Hkv == s.H) and not (x in ("Nq", "Nk") and s.Nq == s.Nk)]
    axes = axes[:2] + (["N"] if s.Nq == s.Nk else []) + axes[2:]
    return " ".join([f"{x}={getattr(s, x)}" for x in axes] + [f"dtype={s.dtype}", f"causal={int(s.causal)}"]
                    + ([f"mode={s.mode}"] if s.mode != "fwd" else []) + [f"{f}={getattr(t, f)}" for f in t.fields()])


def configure(k, params: dict):
    """(AttentionShape, Tiles) of kernel ``k`` from NAME=VALUE strings (the argument lines ``--list`` prints)."""
    p = dict(params)
    shape = make_shape(p.pop("B"), p.pop("H"), p.pop("N", None), p.pop("d"), dtype=p.pop("dtype", "fp32"),
                       causal=p.pop("causal", "0") == "1", Hkv=p.pop("Hkv", None), Nq=p.pop("Nq", None),
                       Nk=p.pop("Nk", None), mode=p.pop("mode", "fwd"))
    return shape, k.make_tiles(shape, **p)


def run(k, params: dict, torch=None) -> None:
    """Build (once), launch and check one configuration given as NAME=VALUE strings."""
    shape, tiles = configure(k, params)
    from perfmodel.measure import build, runner
    torch = torch or build.require_torch()
    r = k.runner(torch, build.load(), shape, tiles)
    err = runner.check_correct(torch, r, seed=0)
    assert err <= r.tolerance, err


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--list", default=None)
    ap.add_argument("--run-grid", default=None, help="run every configuration of this grid once, in --list order")
    ap.add_argument("params", nargs="*", help="NAME=VALUE for B, H, N, d, dtype, causal and the kernel's tiles")
    a = ap.parse_args()
    k = get_kernel(a.kernel)
    if a.list or a.run_grid:
        from perfmodel.measure import grid
        lines = [_args(c) for c in grid.expand(grid.load(a.list or a.run_grid), a.kernel)]
        if a.list:
            print("\n".join(lines))
            return
        from perfmodel.measure import build
        torch = build.require_torch()
        for i, line in enumerate(lines):
            print(f"[{i + 1}/{len(lines)}] {a.kernel} {line}", flush=True)
            try:
                run(k, dict(kv.split("=") for kv in line.split()), torch)
            except Exception as exc:                       # stop: later launches would no longer line up
                print(f"failed: {a.kernel} {line}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                sys.exit(1)
            torch.cuda.empty_cache()
        return
    run(k, dict(kv.split("=") for kv in a.params))


if __name__ == "__main__":
    main()
