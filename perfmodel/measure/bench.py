"""Timing in the manner of triton.testing.do_bench: warm-up, an L2 flush outside the timed region, CUDA events
around each run, median and quantiles.

Before each start event the GPU is kept busy for HEAD_START_S (``torch.cuda._sleep``), so that the host's work
of launching the timed call (PyTorch's dispatch, cuDNN's graph lookup: tens of microseconds, and erratic) is done
before the start event runs: the events then bracket GPU work only. Without it, calls whose host side outlasts the
flush time the host instead of the kernel (seen: cuDNN SDPA at 12-75 us for one 10 us problem).

The head start also measures the SM clock of every run: the spin lasts a known number of SM cycles, so cycles over
its event time (less the fixed time an event pair adds around a spin, measured once from spins of two lengths)
is the clock just before the timed call; a second spin just after it gives the clock at its end. Their medians
over the batch are recorded with the timing, and the median over runs of time x mean clock estimates the call's
SM cycles (DVFS moves the clock between and within runs, and a shared machine's clocks cannot be locked). The
readings are not yet trusted row by row (some read above the GPU's maximum clock: research/notes/measurements.md, the
timing method; research/notes/measurements.md, the head start's clock readings).

A batch of runs whose spread is wide (p80/p20 above SPREAD_LIMIT) was disturbed (on shared machines: another
process on the GPU, a clock dip): it is timed again, up to ``attempts`` batches, and the batch with the narrowest
spread is kept. The rule looks only at the timings' own spread, never at a prediction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


SPREAD_LIMIT = 1.15      # p80/p20 above this: the batch was disturbed


def events_around(torch, fn):
    """CUDA events recorded on the current stream just before and just after ``fn()`` queues its work."""
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    return a, b


def gap_ms(pairs) -> float:
    """The time an event pair measures around a spin beyond its cycles, from pairs of (spin of n, spin of 2n)
    event pairs: they take g + n/f and g + 2n/f, so g = 2 t(n) - t(2n); the median over the pairs."""
    return float(np.median([2 * a.elapsed_time(b) - c.elapsed_time(d) for (a, b), (c, d) in pairs]))


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    n_runs: int
    clock_before_mhz: float = math.nan       # the SM clock of the head-start spin before each run (median)
    clock_after_mhz: float = math.nan        # of the spin just after each run (median)
    median_cycles: float = math.nan          # median over runs of time x the mean of the two clocks

    @property
    def spread(self) -> float:
        return self.p80_ms / self.p20_ms if self.p20_ms > 0 else float("inf")


def unstable(p20_ms, p80_ms) -> bool:
    """Whether a recorded timing's spread marks a disturbed batch."""
    return not float(p80_ms) <= SPREAD_LIMIT * float(p20_ms)


HEAD_START_S = 300e-6
FLUSH_BYTES = 256 * 1024 * 1024      # the L2 flush's buffer, written before each run


class Bencher:
    def __init__(self, torch, flush: bool = True, flush_bytes: int = FLUSH_BYTES, clock_hz: float = 2e9):
        self.torch = torch
        self.flush = flush
        self.cache = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda") if flush else None
        self.sleep_cycles = int(HEAD_START_S * clock_hz)
        self._gap_ms = None

    def _spin(self, cycles: int):
        """Events around a spin of ``cycles`` SM cycles (torch.cuda._sleep), queued on the current stream."""
        return events_around(self.torch, lambda: self.torch.cuda._sleep(cycles))

    def spin_gap_ms(self) -> float:
        """The time an event pair measures around a spin beyond its cycles: spins of n and 2n cycles back to back
        take g + n/f and g + 2n/f, so g = 2 t(n) - t(2n) (the median of 5 pairs, at least 0; measured once)."""
        if self._gap_ms is None:
            n = max(self.sleep_cycles // 2, 1)
            pairs = [(self._spin(n), self._spin(2 * n)) for _ in range(5)]
            self.torch.cuda.synchronize()
            self._gap_ms = max(gap_ms(pairs), 0.0)
        return self._gap_ms

    def clock_mhz(self, spin_ms):
        """The SM clock of spins of ``sleep_cycles`` that took ``spin_ms`` (NaN where the time is not above the gap)."""
        t = np.asarray(spin_ms, dtype=float) - self.spin_gap_ms()
        return np.where(t > 0, self.sleep_cycles / np.where(t > 0, t, 1.0) * 1e-3, np.nan)

    def run(self, fn, setup=None, warmup: int = 3, min_runs: int = 10, max_runs: int = 100,
            target_s: float = 0.25, attempts: int = 3) -> Timing:
        """``setup`` runs before each launch, outside the timed region (re-initialising outputs, say). Up to
        ``attempts`` batches while the spread stays above SPREAD_LIMIT; the narrowest batch is returned."""
        best = None
        for _ in range(max(attempts, 1)):
            t = self._batch(fn, setup, warmup, min_runs, max_runs, target_s)
            if best is None or t.spread < best.spread:
                best = t
            if not unstable(t.p20_ms, t.p80_ms):
                break
        return best

    def flush_l2(self) -> None:
        """Evict the L2 between runs by writing the flush buffer (as triton.testing.do_bench does): the L2 is then
        full of the buffer's dirty lines."""
        self.cache.zero_()

    def interleaved(self, fns: dict, runs: int = 30, warmup: int = 3) -> dict:
        """name -> Timing of several calls timed together: run r of each before run r + 1 of any, so that all see
        the same clock and power state, every run prepared as ``run``'s are (the L2 flush, the head-start spin, the
        spin after it). No batch is repeated: the caller compares the calls, not one call's best batch."""
        spin = self._ready()
        for fn in fns.values():
            for _ in range(warmup):
                self._once(fn, None, spin)
        self.torch.cuda.synchronize()
        got = {name: [] for name in fns}
        for _ in range(runs):
            for name, fn in fns.items():
                got[name].append(self._once(fn, None, spin))
        self.torch.cuda.synchronize()
        return {name: self._timing(r, spin) for name, r in got.items()}

    def _ready(self) -> bool:
        """Whether runs get the clock-measuring spins (the event gap measured first, once)."""
        spin = self.sleep_cycles > 0
        if spin:
            self.spin_gap_ms()
        return spin

    def _once(self, fn, setup, spin):
        """One prepared run: (start, end) events around ``fn`` and the spins before and after it (or None)."""
        if setup is not None:
            setup()
        if self.cache is not None:
            self.flush_l2()
        head = self._spin(self.sleep_cycles) if spin else None
        s, e = events_around(self.torch, fn)
        tail = self._spin(self.sleep_cycles) if spin else None
        return s, e, head, tail

    def _timing(self, runs, spin) -> Timing:
        """The Timing of completed runs of ``_once``."""
        times = np.array([s.elapsed_time(e) for s, e, _, _ in runs])
        clocks = {}
        if spin:
            for i, side in ((2, "before"), (3, "after")):
                clocks[side] = self.clock_mhz([r[i][0].elapsed_time(r[i][1]) for r in runs])
        med = lambda x: float(np.nanmedian(x)) if np.isfinite(x).any() else math.nan
        cycles = times * 1e3 * (clocks["before"] + clocks["after"]) / 2 if spin else np.full(len(runs), np.nan)
        return Timing(float(np.median(times)), float(np.quantile(times, 0.2)), float(np.quantile(times, 0.8)),
                      len(runs), clock_before_mhz=med(clocks.get("before", np.nan)),
                      clock_after_mhz=med(clocks.get("after", np.nan)), median_cycles=med(cycles))

    def _batch(self, fn, setup, warmup, min_runs, max_runs, target_s) -> Timing:
        spin = self._ready()
        for _ in range(warmup):
            self._once(fn, setup, spin)
        self.torch.cuda.synchronize()
        s, e, _, _ = self._once(fn, setup, spin)
        self.torch.cuda.synchronize()
        est_ms = max(s.elapsed_time(e), 1e-3)
        n = int(np.clip(target_s * 1e3 / est_ms, min_runs, max_runs))
        runs = [self._once(fn, setup, spin) for _ in range(n)]
        self.torch.cuda.synchronize()
        return self._timing(runs, spin)
