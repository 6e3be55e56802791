"""Calibration: the constants the timing model needs beyond the spec sheet, measured by ``perfmodel probe``.

Without a calibration file the values are derived from the spec (datasheet bandwidths, latencies from the
microbenchmark literature), so every GPU has a prediction; with one, the GPU's own microbenchmarks are used.
Calibration files are YAML with a ``provenance`` block, a ``values`` block (the throughput fields below and
``path_cycles``: cycles per step of each latency-path feature of perfmodel.model.counts.PATH_FEATURES) and
optionally ``path_fits`` (per-kernel path costs fitted on a declared training split, perfmodel.evaluation.fit).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from perfmodel.errors import InputError, read_yaml
from perfmodel.hw.gpu import GPUSpec, builtin_dir
from perfmodel.model.counts import PATH_FEATURES


BUILTIN_SOURCE = "built-in calibration/"   # a shipped file's source, before its name (resolve)


@dataclass(frozen=True)
class Calibration:
    source: str                      # "spec" or the file it came from
    dram_bw_bps: float               # achievable DRAM bandwidth, bytes read + written per second
    l2_bw_bps: float                 # achievable L2 bandwidth
    l2_effective_bytes: float        # data that stays in L2 under re-reads (the read sweep); reported, not priced:
                                     # the DRAM rule scales with the device's L2 (model/memory.py)
    smem_wavefronts_per_clk: float   # shared-memory wavefronts per clock per SM (1.0 = 128 B/clk)
    fp32_lanes_per_clk: float        # FP32 lanes per clock per SM actually sustained
    sfu_lanes_per_clk: float         # MUFU (ex2) lanes per clock per SM
    launch_overhead_s: float         # fixed cost of a launch seen by CUDA events
    overlap_p: float                 # p of the p-norm joining latency and throughput times (large = max)
    mma_cycles: float                # SM cycles per mma.sync m16n8k16 (fp16/bf16, fp32 accumulate) at the rate
                                     # mma.sync sustains
    wgmma_cycles: float              # SM cycles per m16n8k16-equivalent (4096 FLOPs) of Hopper warpgroup MMAs
    dispatch_window: float           # blocks: the block sharing an SM in slot q lies within q*SMs +- q*this of
                                     # the first (block dispatch order, gpus/arch dispatch_window_blocks)
    cold_start_cycles: float         # SM cycles a launch's first global round trip costs after the timing's L2
                                     # flush beyond a warm one (gpus/arch cold_start_cycles: research/scripts/probe_cold.py)
    queued_op_s: float               # what a second GPU operation queued in one timed call adds (a library's memset
                                     # before its kernel; gpus/arch queued_op_us: research/scripts/probe_cold.py)
    queued_kernel_s: float           # the least a further kernel that touches memory adds, queued in one timed call
                                     # (gpus/arch queued_kernel_us: research/scripts/probe_cold.py's touch launches)
    path_cycles: dict                # feature -> cycles per step on a warp's path (PATH_FEATURES)
    # kernel -> {"costs": {feature: cycles}, "training": {...}}: costs fitted to kernel timings on a declared
    # training split, for loop forms no microbenchmark covers; they replace path_cycles for that kernel only
    path_fits: dict = field(default_factory=dict)
    # the instruction supply of once-run code when co-resident blocks sit at different points of it (gpus/arch
    # fetch_once_ipc: the instruction-cache probe's layout runs); {} where unmeasured: no fetch term
    fetch_once_ipc: dict = field(default_factory=dict)
    basis_note: str = ""             # for a GPU without a probe file: where its architecture's constants come from
    # the power model's energies and limit (perfmodel.model.power.FIELDS: research/scripts/fit_power.py from the power
    # probe); {} where unmeasured: every launch runs at the clock the model times it at
    power: dict = field(default_factory=dict)
    # the bytes of a buffer every block re-reads at which half its re-reads miss L2 (research/scripts/probe_l2_share.py
    # counts it, `perfmodel probe` times it): the unit of the DRAM rule's cross-wave ramp (model/memory.py); 0 where
    # unmeasured: the H100's share of L2
    l2_shared_bytes: float = 0.0
    # bytes a second that fp32 reductions (red.global.add) add in L2 from every SM (`perfmodel probe` step 5c); 0
    # where unmeasured: they are priced as plain stores at l2_bw_bps
    l2_red_bps: float = 0.0
    # bytes a second a stream of DRAM reads alone reaches (research/scripts/probe_l2_stream.py's DRAM runs): above
    # dram_bw_bps, a copy's, whose writes turn the bus around; 0 where unmeasured: the copy's
    dram_read_bw_bps: float = 0.0

    @property
    def dram_floor_rates(self) -> tuple[float, float]:
        """(read, write) bytes a second of the DRAM floor (timing.dram_floor_s): reads at the read stream's rate,
        writes at the rate that puts a copy (as many bytes written as read) at dram_bw_bps."""
        read = max(self.dram_read_bw_bps, self.dram_bw_bps)
        return read, 1 / max(2 / self.dram_bw_bps - 1 / read, 1 / read)

    @property
    def basis(self) -> str:
        """'probe' (this GPU's own probe file) or 'spec' (spec sheet + architecture constants)."""
        return "probe" if self.source.endswith(".yaml") else "spec"

    @property
    def shipped(self) -> bool:
        """Whether this is what a prediction takes without a file given (resolve): the shipped file, or the spec."""
        return self.basis == "spec" or self.source.startswith(BUILTIN_SOURCE)

    # ``key``: the kernel whose fitted path costs apply (a kernel's ``Kernel.fit_key``: its own name, or the
    # kernel whose loop forms it shares)
    def path_costs(self, key: str) -> dict:
        """Cycles per step of each path feature, for the kernel ``key``; and its FIT_PARAMS (``overlap``: the
        calibration's overlap_p unless the kernel's fit holds its own)."""
        costs = dict(self.path_cycles, overlap=self.overlap_p, overlap_rows=0.0, own_path=1.0, miss_latency=0.0,
                     age_tail=0.0)
        costs.update(self.path_fits.get(key, {}).get("costs", {}))
        return costs

    def fitted(self, key: str) -> bool:
        return key in self.path_fits

    def path_basis(self, key: str) -> str:
        """Where kernel ``key``'s path costs come from, in a word: "fitted", "fitted, scaled" (another
        architecture's fit, its costs in cycles scaled to this architecture's latencies: carried_fits) or the
        calibration's basis."""
        if not self.fitted(key):
            return self.basis
        return "fitted, scaled" if self.path_fits[key].get("carried") == "scaled" else "fitted"

    def describe(self, key: str | None = None, kernel: str | None = None) -> str:
        """Where the constants come from, in words: probed on this GPU, or the spec with its architecture's
        constants (transferred from another GPU's probe, published figures, estimates); and the path costs of
        ``kernel`` (whose fitted costs are ``key``'s)."""
        text = (f"probed on this GPU ({self.source})" if self.basis == "probe"
                else f"{self.source}: {self.basis_note}")
        if key is not None and self.fitted(key):
            fit = self.path_fits[key]
            donor = fit.get("carried_from") or (fit.get("carried_over") or {}).get("from")
            text += ("; path costs fitted on a training split" + (f" of {donor}" if donor else "")
                     + (f" of {key}" if kernel not in (None, key) else "")
                     + (", scaled to this architecture's latencies" if self.path_basis(key) == "fitted, scaled"
                        else ""))
        return text

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _tensor_flops_per_clk(gpu: GPUSpec) -> float | None:
    """Dense fp16 tensor FLOPs per SM clock: the datasheet's peak is quoted at the tensor clock, and per clock
    the rate is the architecture's. None without tensor cores."""
    peak = gpu.tensor_flops("fp16")
    return peak / (gpu.sm_count * (gpu.clock_tensor_mhz or gpu.clock_boost_mhz) * 1e6) if peak else None


def spec_mma_cycles(gpu: GPUSpec) -> float:
    """SM cycles per m16n8k16 (4096 FLOPs) from the datasheet's dense fp16 peak (fp32 accumulate), at the share of
    that peak mma.sync sustains on the architecture (gpus/arch: Luo et al. measure 65% on Hopper, ~100% on
    Ampere), at the SM clock the model runs at."""
    from perfmodel.hw import arch

    per_clk = _tensor_flops_per_clk(gpu)
    if not per_clk:
        return 1e9                                   # no tensor cores: a tensor instruction never runs
    return 4096 / per_clk / arch.value(arch.nearest(gpu.sm), "mma_sync_fraction", 1.0)


def spec_wgmma_cycles(gpu: GPUSpec) -> float:
    """Warpgroup MMAs (sm_90 only): the dense peak at the share wgmma sustains on random data (gpus/arch)."""
    from perfmodel.hw import arch

    frac = arch.value(arch.nearest(gpu.sm), "wgmma_fraction", 0.0)
    per_clk = _tensor_flops_per_clk(gpu)
    if not frac or not per_clk or gpu.sm != "sm_90":
        return 1e9                                   # no warpgroup MMAs on this architecture
    return 4096 / per_clk / frac


def from_spec(gpu: GPUSpec) -> Calibration:
    """Constants for a GPU without a probe file of its own: its spec sheet for bandwidths and unit counts, and its
    architecture's constants in cycles (gpus/arch/sm_XY.yaml: another GPU's probe of the same SM, or published
    microbenchmarks; every value there has a source or is marked as an estimate). An architecture without a file
    takes the nearest one's, and says so. DRAM bandwidth is the spec's measured figure, else the datasheet's at
    the architecture's achievable fraction; the spec's L2 bandwidths are measured figures already. The kernels'
    fitted path costs come from the GPU the architecture file names (carried_fits)."""
    from perfmodel.hw import arch

    base = _spec_constants(gpu)
    head = arch.header(arch.nearest(gpu.sm))
    return dataclasses.replace(base, path_fits=carried_fits(gpu, head, base.path_cycles))


def carried_fits(gpu: GPUSpec, head: dict, cycles: dict, into: Path | None = None) -> dict:
    """The kernels' fits of the GPU an architecture file names, for a GPU without a probe of its own. The same SM
    (``path_fits_from``) takes them whole. Another architecture (``scaled_fits_from``) takes the unitless ones
    (JOIN_PARAMS) as they are and each cost in cycles as the same multiple of its own base cost (``cycles``: this
    architecture's probe-equivalent latencies) that the fit is of the donor's base cost (the donor's probe): what
    a fit learns beyond the microbenchmarks is how the kernel's code chains those latencies, which the same source
    compiled for sm_80 or sm_86 repeats (the same HMMA, LDSM, MUFU, barrier and cp.async counts: README, GPU
    specs). A cost whose base is 0 on either side (no microbenchmark prices it) carries as it is. On the H100 the
    join's parameters alone, at its probe's latencies, put fa2_tc 17% slow on every measured row, and its probe
    alone fa2 23% fast: research/notes/known-gaps-log.md. ``into``: a calibration file of this GPU's own that lacks fits (a
    `perfmodel probe` run's), which takes them from the donor even where the donor is this GPU's shipped file."""
    donor_key = head.get("path_fits_from") or head.get("scaled_fits_from")
    donor = builtin_dir() / "calibration" / f"{donor_key}.yaml" if donor_key else None
    own = Path(into) if into is not None else builtin_dir() / "calibration" / f"{gpu.key}.yaml"
    if not donor_key or not donor.exists() or donor.resolve() == own.resolve():
        return {}
    if "path_fits_from" in head:
        raw = read_yaml(donor, "calibration file") or {}
        fits = {k: _costs(donor, f"path_fits.{k}.costs", v.get("costs"))
                for k, v in (raw.get("path_fits") or {}).items()}
        return {k: {"costs": c, "carried_from": donor_key} for k, c in fits.items() if c}
    from perfmodel.hw import gpu as gpu_mod

    # the donor's own calibration: its fits and the base costs they are multiples of (its probe over its spec's)
    own = load(donor, gpu_mod.resolve(donor_key))
    return {k: {"costs": {p: _scaled(p, c, own.path_cycles, cycles) for p, c in f["costs"].items()},
                "carried_from": donor_key, "carried": "scaled"}
            for k, f in own.path_fits.items() if f["costs"]}


def _scaled(param: str, cost: float, donor_cycles: dict, cycles: dict) -> float:
    """A fitted cost carried to another architecture (carried_fits)."""
    if param in JOIN_PARAMS:
        return cost
    key = CYCLE_BASE.get(param, param)
    d, t = donor_cycles.get(key, 0.0), cycles.get(key, 0.0)
    return cost * t / d if d > 0 and t > 0 else cost


def _spec_constants(gpu: GPUSpec) -> Calibration:
    """from_spec without the kernels' fits."""
    from perfmodel.hw import arch

    sm = arch.nearest(gpu.sm)
    a = lambda key: arch.value(sm, key)
    head = arch.header(sm)
    dram = (gpu.measured_dram_bw_gbps * 1e9 if gpu.measured_dram_bw_gbps
            else gpu.dram_bw_peak * a("dram_bw_fraction"))
    note = head.get("basis", sm) + ("" if sm == gpu.sm else f"; {sm} constants assumed for {gpu.sm}")
    return Calibration(
        source=f"spec + {sm} constants",
        dram_bw_bps=dram,
        l2_bw_bps=gpu.l2_bw,
        l2_effective_bytes=float(gpu.l2_bytes),
        smem_wavefronts_per_clk=gpu.smem_bytes_per_clk_per_sm / (gpu.smem_banks * gpu.smem_bank_width_bytes),
        fp32_lanes_per_clk=gpu.fp32_lanes_per_sm * a("fp32_issue_fraction"),
        sfu_lanes_per_clk=gpu.sfu_ops_per_clk_per_sm * a("sfu_issue_fraction"),
        launch_overhead_s=a("launch_overhead_us") * 1e-6,
        overlap_p=a("overlap_p"),
        mma_cycles=spec_mma_cycles(gpu),
        wgmma_cycles=spec_wgmma_cycles(gpu),
        dispatch_window=a("dispatch_window_blocks"),
        cold_start_cycles=a("cold_start_cycles"),
        queued_op_s=a("queued_op_us") * 1e-6,
        queued_kernel_s=a("queued_kernel_us") * 1e-6,
        path_cycles={
            "dot": a("dot_step_cycles"), "reduction": a("reduction_step_cycles"), "exp": a("exp_step_cycles"),
            "outer": 0.0,                 # no probe prices it: the step costs carry their own loop overhead
            "conflict": a("conflict_cycles"), "fp32": a("fp32_latency_cycles"), "sfu": a("sfu_latency_cycles"),
            "gmem": a("l2_latency_cycles"), "sync": a("sync_cycles"),
            "load": a("l2_latency_cycles"), "load_miss": a("dram_latency_cycles"),
            "mma": arch.value(sm, "mma_latency_cycles", 0.0) or 1e9,     # no tensor cores: never on a path
            "wgmma": arch.value(sm, "wgmma_wait_cycles", 0.0) or 1e9,    # no warpgroup MMAs: never on a path
            "shfl": a("smem_latency_cycles"),   # estimate: a shuffle crosses the same crossbar as a shared load
            "local": a("smem_latency_cycles"),  # estimate: a spill reload is an L1 hit, as close as a shared load
            "cycle": 1.0,
        },
        fetch_once_ipc=arch.table(sm, "fetch_once_ipc") or {},
        basis_note=note,
    )


_FIELDS = ({f.name for f in dataclasses.fields(Calibration)}
           - {"source", "path_fits", "basis_note", "fetch_once_ipc", "power"})
# Features whose cost may be 0: 'outer' has no microbenchmark (its steps carry their own loop overhead)
_MAY_BE_ZERO = {"outer"}


def _number(path, what, v, may_be_zero=False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{path}: {what} must be a number, got {v!r}")
    v = float(v)
    if not (v == v and v not in (float("inf"), float("-inf"))):
        raise InputError(f"{path}: {what} must be finite, got {v!r}")
    if v < 0 or (v == 0 and not may_be_zero):
        raise InputError(f"{path}: {what} must be {'non-negative' if may_be_zero else 'positive'}, got {v!r}")
    return v


# what a kernel's fit may hold beside path costs
FIT_PARAMS = {"overlap": "the p of the p-norm joining a block's path and the SM's pipes, for this kernel "
                         "(default: the calibration's overlap_p)",
              "overlap_rows": "how that p falls with the query rows each scheduler holds of one block "
                              "(Counts.sched_rows): p is multiplied by (rows / 16)^-this (default 0: not at all)",
              "own_path": "the rate at which a warp's own work on a kernel's path_pipes lies on its path, in "
                          "multiples of the SM's rate (default 1; the SM's sub-partitions: its own sub-partition's, "
                          "with none of it overlapping the warp's other work)",
              "miss_latency": "cycles from issuing a tile load that misses L2 to its arrival, of which a block waits "
                              "what the phase the load overlaps does not cover, and at least load_miss "
                              "(Counts.load_steps; default 0: every miss costs load_miss)",
              "age_tail": "the share of its last round by which a launch ends later where that round's blocks split "
                          "their SM in the schedulers' age order (Counts.age_split_warps; default 0: not at all)"}
# the FIT_PARAMS without a unit: how a kernel's warps overlap their own work and one another's (the join's p, its fall
# with the rows a scheduler holds, the rate of a warp's own work on its path). They describe the kernel's code, so a
# GPU of another architecture takes them as they are from a fit of the kernel elsewhere (gpus/arch:
# scaled_fits_from; carried_fits): without them FlashAttention-2's join fell back to the probe's p (3.9, near a max),
# which priced its in-warp chain of MMAs and softmax as if other warps hid all of it
JOIN_PARAMS = ("overlap", "overlap_rows", "own_path", "age_tail")
# the FIT_PARAMS in cycles, and the path feature whose base cost scales them to another architecture (carried_fits)
CYCLE_BASE = {"miss_latency": "load_miss"}
# where a fit starts a FIT_PARAM that has no value yet (0 would be a fixed point of the fit's log-space steps);
# miss_latency: the crowd probe's copy-and-wait of a 16 KB tile from DRAM, one block an SM, on the H100: 1,387-1,476
# cycles (research/data/h100/probe/crowd.json)
FIT_START = {"overlap_rows": 0.3, "miss_latency": 1400.0, "age_tail": 0.05}


def _costs(path, where, costs) -> dict:
    if not isinstance(costs, dict):
        raise InputError(f"{path}: {where} must map path features to cycles")
    unknown = sorted(set(costs) - set(PATH_FEATURES) - set(FIT_PARAMS))
    if unknown:
        raise InputError(f"{path}: {where}: unknown path feature '{unknown[0]}' "
                         f"(known: {', '.join([*PATH_FEATURES, *FIT_PARAMS])})")
    return {k: _number(path, f"{where}.{k}", v, may_be_zero=True) for k, v in costs.items()}


def load(path: str | Path, gpu: GPUSpec) -> Calibration:
    """A calibration file; fields it lacks keep their spec-derived values."""
    path = Path(path)
    raw = read_yaml(path, "calibration file")
    if not isinstance(raw, dict) or not isinstance(raw.get("values"), dict):
        raise InputError(f"{path}: expected a 'values' mapping")
    values = dict(raw["values"])
    unknown = sorted(set(values) - _FIELDS)
    if unknown:
        raise InputError(f"{path}: unknown calibration field '{unknown[0]}'")
    base = from_spec(gpu)
    cycles = dict(base.path_cycles)
    for k, v in _costs(path, "values.path_cycles", values.pop("path_cycles", {}) or {}).items():
        if v == 0 and k not in _MAY_BE_ZERO:
            raise InputError(f"{path}: values.path_cycles.{k} must be positive, got 0")
        cycles[k] = v
    nums = {k: _number(path, f"calibration field '{k}'", v) for k, v in values.items()}
    fits = raw.get("path_fits") or {}
    if not isinstance(fits, dict):
        raise InputError(f"{path}: 'path_fits' must be a mapping of kernel -> fit")
    clean = {}
    for kernel, fit in fits.items():
        if not isinstance(fit, dict):
            raise InputError(f"{path}: path_fits.{kernel} must be a mapping with 'costs'")
        clean[str(kernel)] = dict(fit, costs=_costs(path, f"path_fits.{kernel}.costs", fit.get("costs")))
    # a kernel the file holds no fit of takes its architecture's donor's, as a GPU without a file does (from_spec),
    # scaled to this file's latencies where the donor is another architecture
    from perfmodel.hw import arch

    carried = carried_fits(gpu, arch.header(arch.nearest(gpu.sm)), cycles, into=path)
    return dataclasses.replace(base, source=str(path), path_cycles=cycles, path_fits={**carried, **clean},
                               basis_note="", power=_power(path, raw.get("power")), **nums)


def _power(path, block) -> dict:
    """A calibration file's ``power`` block: every field of perfmodel.model.power.FIELDS, or none."""
    from perfmodel.model.power import FIELDS

    if block is None:
        return {}
    if not isinstance(block, dict):
        raise InputError(f"{path}: 'power' must be a mapping of {', '.join(FIELDS)}")
    unknown = sorted(set(block) - set(FIELDS))
    if unknown:
        raise InputError(f"{path}: power: unknown field '{unknown[0]}' (known: {', '.join(FIELDS)})")
    missing = [k for k in FIELDS if k not in block]
    if missing:
        raise InputError(f"{path}: power: missing field '{missing[0]}'")
    return {k: _number(path, f"power.{k}", v, may_be_zero=k.endswith(("_nj", "_byte")) or k.startswith("gap_"))
            for k, v in block.items()}


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
        cal = dataclasses.replace(load(found, gpu), source=f"{BUILTIN_SOURCE}{found.name}") if found \
            else from_spec(gpu)
    return cal if use_fits else dataclasses.replace(cal, path_fits={})
