"""The research scripts' shared helpers (research/scripts/common.py), without a GPU."""

import numpy as np

import common


def test_best_cycles_per_iter_is_the_least_median_over_launches():
    """The probe scripts' timing (common.best_cycles_per_iter): each launch writes every block's cycles; the
    median over blocks per iteration, the least over launches."""
    spans = iter([[100, 300, 200], [90, 400, 120], [500, 500, 10]])      # medians 200, 120, 500
    cycles = type("buf", (), {})()

    def launch():
        cycles.cpu = lambda s=np.array(next(spans)): type("t", (), {"numpy": lambda self: s})()

    torch = type("torch", (), {"cuda": type("cuda", (), {"synchronize": staticmethod(lambda: None)})})
    assert common.best_cycles_per_iter(torch, launch, cycles, iters=10) == 12.0
