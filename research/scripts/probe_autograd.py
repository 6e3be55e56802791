"""The host's share of a backward run through autograd, timed as `measure` times the SDPA backwards
(perfmodel.measure.bench.Bencher: L2 flush and head start outside the events), as JSON.
    python3 research/scripts/probe_autograd.py OUT.json
A chain of k scalings of a 256-float tensor (k = 1, 2, 4, 8, 16) is differentiated with torch.autograd.grad
(retain_graph, a given output gradient: SDPA's runner's call): its backward queues k tiny kernels, so the event
time is the host's issue time of the call and its k operations; the same k kernels queued directly, without
autograd, give the plain launch cost. No attention kernel is timed here.
"""
import numpy as np

import common
from perfmodel.measure.bench import Bencher


def main(path):
    from perfmodel.measure import build

    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    bench = Bencher(torch)
    rows = []
    for k in (1, 2, 4, 8, 16):
        x = torch.randn(256, device="cuda", requires_grad=True)
        y = x
        for _ in range(k):
            y = y * 1.0001
        g = torch.randn_like(y)
        auto = bench.run(lambda: torch.autograd.grad(y, x, g, retain_graph=True), min_runs=30, max_runs=200)
        z = torch.randn(256, device="cuda")

        def direct():
            w = z
            for _ in range(k):
                w = w * 1.0001
        plain = bench.run(direct, min_runs=30, max_runs=200)
        rows.append({"ops": k, "autograd_us": auto.median_ms * 1e3, "direct_us": plain.median_ms * 1e3})
        print(rows[-1], flush=True)
    ks = np.array([r["ops"] for r in rows], float)
    fit = lambda key: np.polyfit(ks, [r[key] for r in rows], 1).tolist()      # (per op, fixed), us
    common.write_record(path, torch, tool, {"rows": rows, "autograd_per_op_and_fixed_us": fit("autograd_us"),
                                            "direct_per_op_and_fixed_us": fit("direct_us")}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
