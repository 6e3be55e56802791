"""Timing in the manner of triton.testing.do_bench: warm-up, an L2 flush outside the timed region, CUDA events
around each run, median and quantiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    n_runs: int


class Bencher:
    def __init__(self, torch, flush: bool = True, flush_bytes: int = 256 * 1024 * 1024):
        self.torch = torch
        self.flush = flush
        self.cache = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda") if flush else None

    def run(self, fn, setup=None, warmup: int = 3, min_runs: int = 10, max_runs: int = 100,
            target_s: float = 0.25) -> Timing:
        """``setup`` runs before each launch, outside the timed region (re-initialising outputs, say)."""
        torch = self.torch

        def once():
            if setup is not None:
                setup()
            if self.cache is not None:
                self.cache.zero_()
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            return s, e

        for _ in range(warmup):
            once()
        torch.cuda.synchronize()
        s, e = once()
        torch.cuda.synchronize()
        est_ms = max(s.elapsed_time(e), 1e-3)
        n = int(np.clip(target_s * 1e3 / est_ms, min_runs, max_runs))
        events = [once() for _ in range(n)]
        torch.cuda.synchronize()
        times = np.array([a.elapsed_time(b) for a, b in events])
        return Timing(float(np.median(times)), float(np.quantile(times, 0.2)), float(np.quantile(times, 0.8)), n)
