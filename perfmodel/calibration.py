"""Calibration: the few constants the timing model needs beyond the spec sheet, measured by ``perfmodel probe``.

Without a calibration file the values are derived from the spec (datasheet bandwidths, latencies from the
microbenchmark literature), so every GPU has a prediction; with one, the GPU's own microbenchmarks are used.
Calibration files are YAML with a ``provenance`` block and a ``values`` block (keys = the fields below).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from perfmodel.counts import Counts
from perfmodel.errors import InputError, read_yaml
from perfmodel.gpu import GPUSpec, builtin_dir


@dataclass(frozen=True)
class Calibration:
    source: str                      # "spec" or the file it came from
    dram_bw_bps: float               # achievable DRAM bandwidth, bytes read + written per second
    l2_bw_bps: float                 # achievable L2 bandwidth
    l2_effective_bytes: float        # data that stays in L2 under re-reads (below the nominal size on split L2s)
    smem_wavefronts_per_clk: float   # shared-memory wavefronts per clock per SM (1.0 = 128 B/clk)
    fp32_lanes_per_clk: float        # FP32 lanes per clock per SM actually sustained
    sfu_lanes_per_clk: float         # MUFU (ex2) lanes per clock per SM
    iter_cycles: float               # one warp's dependent dot-product step (2 LDS + FFMA), no conflicts
    red_cycles: float                # one warp's reduction step (LDS + dependent FMNMX/FADD)
    exp_cycles: float                # one warp's exp step (LDS, FADD, __expf, STS)
    outer_cycles: float              # per set-up instruction of an outer-loop iteration: no probe prices it, so 0
                                     # (the step costs carry their own loop overhead) unless a kernel's fit sets it
    conflict_cycles: float           # extra cycles on a warp's path per extra (conflict) wavefront
    fp32_latency_cycles: float
    sfu_latency_cycles: float
    gmem_latency_cycles: float       # a global round trip on a warp's path (L2 hit or DRAM)
    sync_cycles: float               # one __syncthreads
    launch_overhead_s: float         # fixed cost of a launch seen by CUDA events
    overlap_p: float                 # p of the p-norm joining latency and throughput times (large = max)
    # kernel -> {path feature: cycles}: costs fitted to kernel timings on a declared training split, for loop
    # forms no microbenchmark covers (see perfmodel/fit.py); they replace the defaults for that kernel only
    path_fits: dict = field(default_factory=dict)

    def path_costs(self, kernel: str) -> dict:
        """Cycles per unit of each path feature of Counts, for one kernel."""
        costs = {"chain_dot": self.iter_cycles, "chain_red": self.red_cycles, "chain_exp": self.exp_cycles,
                 "chain_outer": self.outer_cycles,
                 "chain_conflict_wf": self.conflict_cycles, "chain_fp32": self.fp32_latency_cycles,
                 "chain_sfu": self.sfu_latency_cycles, "chain_gmem": self.gmem_latency_cycles,
                 "chain_syncs": self.sync_cycles}
        costs.update(self.path_fits.get(kernel, {}).get("costs", {}))
        return costs

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def from_spec(gpu: GPUSpec) -> Calibration:
    """Defaults from the spec sheet alone."""
    return Calibration(
        source="spec",
        dram_bw_bps=gpu.dram_bw,
        l2_bw_bps=gpu.l2_bw,
        l2_effective_bytes=float(gpu.l2_bytes),
        smem_wavefronts_per_clk=gpu.smem_bytes_per_clk_per_sm / (gpu.smem_banks * gpu.smem_bank_width_bytes),
        fp32_lanes_per_clk=float(gpu.fp32_lanes_per_sm),
        sfu_lanes_per_clk=float(gpu.sfu_ops_per_clk_per_sm),
        # two loads in flight per step, unrolled 4 ways: latency amortised over 4 steps, FFMAs dependent
        iter_cycles=gpu.smem_latency_cycles / 4 + gpu.fp32_latency_cycles,
        red_cycles=gpu.smem_latency_cycles / 4 + gpu.fp32_latency_cycles,
        exp_cycles=gpu.sfu_latency_cycles + 5 * gpu.fp32_latency_cycles,
        outer_cycles=0.0,
        conflict_cycles=1.0,
        fp32_latency_cycles=gpu.fp32_latency_cycles,
        sfu_latency_cycles=gpu.sfu_latency_cycles,
        gmem_latency_cycles=gpu.l2_latency_cycles,
        sync_cycles=2 * gpu.smem_latency_cycles,
        launch_overhead_s=gpu.launch_overhead_us * 1e-6 / 2,
        overlap_p=4.0,
    )


_FIELDS = {f.name for f in dataclasses.fields(Calibration)} - {"source", "path_fits"}
_PATH_FEATURES = Counts.PATH_FEATURES


def load(path: str | Path, gpu: GPUSpec) -> Calibration:
    """A calibration file; fields it lacks keep their spec-derived values."""
    path = Path(path)
    raw = read_yaml(path, "calibration file")
    if not isinstance(raw, dict) or not isinstance(raw.get("values"), dict):
        raise InputError(f"{path}: expected a 'values' mapping")
    values = raw["values"]
    unknown = sorted(set(values) - _FIELDS)
    if unknown:
        raise InputError(f"{path}: unknown calibration field '{unknown[0]}'")
    for k, v in values.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or (v == 0 and k != "outer_cycles"):
            raise InputError(f"{path}: calibration field '{k}' must be a positive number, got {v!r}")
    fits = raw.get("path_fits") or {}
    if not isinstance(fits, dict):
        raise InputError(f"{path}: 'path_fits' must be a mapping of kernel -> fit")
    for kernel, fit in fits.items():
        costs = fit.get("costs") if isinstance(fit, dict) else None
        if not isinstance(costs, dict) or set(costs) - set(_PATH_FEATURES):
            raise InputError(f"{path}: path_fits.{kernel}.costs must map path features to cycles")
        if any(not isinstance(v, (int, float)) or v < 0 for v in costs.values()):
            raise InputError(f"{path}: path_fits.{kernel}.costs must be non-negative numbers")
    return dataclasses.replace(from_spec(gpu), source=str(path), path_fits=fits,
                               **{k: float(v) for k, v in values.items()})


def builtin_path(gpu: GPUSpec) -> Path | None:
    """The shipped calibration for this GPU (gpus/calibration/<key>.yaml), if any."""
    p = builtin_dir() / "calibration" / f"{gpu.key}.yaml"
    return p if p.exists() else None


def resolve(gpu: GPUSpec, path: str | Path | None = None, use_builtin: bool = True,
            use_fits: bool = True) -> Calibration:
    """The calibration to use: a given file, else the shipped one for this GPU, else spec-derived defaults.
    ``use_fits=False`` drops the path costs fitted to kernel timings (probe and spec constants only)."""
    if path is not None:
        cal = load(path, gpu)
    else:
        found = builtin_path(gpu) if use_builtin else None
        cal = load(found, gpu) if found else from_spec(gpu)
    return cal if use_fits else dataclasses.replace(cal, path_fits={})
