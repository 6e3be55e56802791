"""One entry point: configuration(s) + GPU (+ calibration) -> Prediction. Pure and vectorised."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel import kernels, seed_model, timing
from perfmodel.calibration import Calibration
from perfmodel.counts import Counts
from perfmodel.gpu import GPUSpec
from perfmodel.problem import Config


@dataclass(frozen=True)
class Prediction:
    counts: Counts
    timing: timing.Timing
    roofline_time_s: np.ndarray

    @property
    def time_s(self):
        return self.timing.time_s


def predict_arrays(gpu: GPUSpec, kernel: str, cal: Calibration, B, H, N, d, Br, Bc, threads=None, pad=None,
                   regs=None) -> Prediction:
    """Vectorised over numpy arrays of parameters (broadcast together)."""
    k = kernels.get(kernel)
    threads = k.DEFAULT_THREADS if threads is None else threads
    pad = k.DEFAULT_PAD if pad is None else pad
    c = k.counts(gpu, B, H, N, d, Br, Bc, threads=threads, pad=pad, regs=regs, l2_bytes=cal.l2_effective_bytes)
    t = timing.predict(c, gpu, cal, kernel)
    roof = np.maximum(c.flops / gpu.fp32_flops, c.dram_bytes / gpu.dram_bw_peak)
    return Prediction(counts=c, timing=t, roofline_time_s=roof)


def predict(gpu: GPUSpec, cfg: Config, cal: Calibration, regs=None) -> Prediction:
    """One configuration, after checking that it fits the GPU (raises InputError otherwise)."""
    kernels.get(cfg.kernel).check(gpu, cfg.B, cfg.H, cfg.N, cfg.d, cfg.Br, cfg.Bc, threads=cfg.threads, pad=cfg.pad)
    return predict_arrays(gpu, cfg.kernel, cal, cfg.B, cfg.H, cfg.N, cfg.d, cfg.Br, cfg.Bc, cfg.threads, cfg.pad,
                          regs=regs)


def predict_seed(gpu: GPUSpec, cfg: Config) -> seed_model.SeedPrediction:
    return seed_model.predict(gpu, cfg.B, cfg.H, cfg.N, cfg.d, cfg.Br, cfg.Bc)


def default_regs(kernel: str) -> int:
    return kernels.get(kernel).REGS_PER_THREAD
