"""Run one configuration once (for profilers): ``python -m perfmodel.measure.one --kernel fa2 N=512 d=32 ...``.
``--list GRID.yaml`` prints the grid's configurations as argument lines instead."""

from __future__ import annotations

import argparse
import math

from perfmodel.problem import make_config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--list", default=None)
    ap.add_argument("params", nargs="*", help="NAME=VALUE for B, H, N, d, Br, Bc, threads, pad")
    a = ap.parse_args()
    if a.list:
        from perfmodel.measure import grid
        for c in grid.expand(grid.load(a.list), a.kernel):
            print(f"B={c.B} H={c.H} N={c.N} d={c.d} Br={c.Br} Bc={c.Bc} threads={c.threads} pad={c.pad}")
        return
    p = {k: int(v) for k, v in (kv.split("=") for kv in a.params)}
    cfg = make_config(a.kernel, p["B"], p["H"], p["N"], p["d"], p["Br"], p["Bc"], p.get("threads"), p.get("pad"))
    from perfmodel.measure import build, runner
    torch = build.require_torch()
    ext = build.load()
    r = runner.KernelRunner(torch, ext, cfg)
    g = torch.Generator(device="cuda").manual_seed(0)
    Q, K, V = (torch.randn((cfg.B, cfg.H, cfg.N, cfg.d), generator=g, device="cuda") for _ in range(3))
    r.setup()
    r.launch(Q, K, V)
    torch.cuda.synchronize()
    ref = runner.reference(torch, Q, K, V)
    err = float(torch.linalg.vector_norm(r.O.double() - ref) / torch.linalg.vector_norm(ref))
    assert math.isfinite(err) and err < 1e-5, err


if __name__ == "__main__":
    main()
