"""Run one configuration once (for profilers): ``python -m perfmodel.measure.one --kernel fa2 N=512 d=32 ...``.
``--list GRID.yaml`` prints the grid's configurations as argument lines instead."""

from __future__ import annotations

import argparse

from perfmodel.kernels import get as get_kernel
from perfmodel.shape import AXES, make_shape


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--list", default=None)
    ap.add_argument("params", nargs="*", help="NAME=VALUE for B, H, N, d, dtype, causal and the kernel's tiles")
    a = ap.parse_args()
    k = get_kernel(a.kernel)
    if a.list:
        from perfmodel.measure import grid
        for c in grid.expand(grid.load(a.list), a.kernel):
            s, t = c.shape, c.tiles
            print(" ".join([f"{x}={getattr(s, x)}" for x in AXES] + [f"dtype={s.dtype}", f"causal={int(s.causal)}"]
                           + [f"{f}={getattr(t, f)}" for f in t.fields()]))
        return
    p = dict(kv.split("=") for kv in a.params)
    shape = make_shape(*(p.pop(x) for x in AXES), dtype=p.pop("dtype", "fp32"), causal=p.pop("causal", "0") == "1")
    tiles = k.make_tiles(shape, **p)
    from perfmodel.measure import build, runner
    torch = build.require_torch()
    r = k.runner(torch, build.load(), shape, tiles)
    err = runner.check_correct(torch, r, seed=0)
    assert err <= r.tolerance, err


if __name__ == "__main__":
    main()
