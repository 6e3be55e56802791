"""GPU specifications: YAML files, one schema, one loader.

Every key carries its unit in its name (``_mhz``, ``_bytes``, ``_gbps`` = 1e9 B/s, ``_tflops`` = 1e12 FLOP/s,
``_cycles`` = SM clock cycles). Units are converted once, here, into the properties of :class:`GPUSpec`.
(Over 300 lines because the schema table and the dataclass list every field once each; splitting them would put
one schema in two files.)
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from perfmodel.errors import InputError, read_yaml

# field -> (python type, required). Every numeric field must be > 0.
_SCHEMA: dict[str, tuple[type, bool]] = {
    "name": (str, True),
    "aliases": (list, False),
    "arch": (str, True),
    "compute_capability": (str, True),
    "sources": (list, True),
    "sm_count": (int, True),
    "clock_boost_mhz": (float, True),
    "clock_tensor_mhz": (float, False),
    "fp32_lanes_per_sm": (int, True),
    "sfu_ops_per_clk_per_sm": (int, True),
    "lsu_lanes_per_clk_per_sm": (int, False),     # informational (no kernel model reads it yet)
    "fp32_tflops": (float, True),
    "tensor_fp16_tflops": (float, False),
    "tensor_bf16_tflops": (float, False),
    "tensor_tf32_tflops": (float, False),
    "tensor_fp8_tflops": (float, False),
    "tensor_fp16_acc16_tflops": (float, False),   # fp16 inputs with fp16 accumulation, where it differs
    "dram_bytes": (int, True),
    "dram_bw_gbps": (float, True),
    "l2_bytes": (int, True),
    "l2_bw_gbps": (float, True),
    "smem_per_sm_bytes": (int, True),
    "smem_per_block_bytes": (int, False),         # informational: the limit without opt-in
    "smem_per_block_optin_bytes": (int, True),
    "smem_reserved_per_block_bytes": (int, True),
    "smem_alloc_granularity_bytes": (int, True),
    "smem_bytes_per_clk_per_sm": (int, True),
    "smem_banks": (int, True),
    "smem_bank_width_bytes": (int, True),
    "regs_per_sm": (int, True),
    "regs_per_block": (int, True),
    "max_regs_per_thread": (int, True),
    "reg_alloc_granularity": (int, True),
    "max_threads_per_sm": (int, True),
    "max_warps_per_sm": (int, True),
    "max_blocks_per_sm": (int, True),
    "max_threads_per_block": (int, True),
    "warp_size": (int, True),
    "schedulers_per_sm": (int, True),
    "fp32_latency_cycles": (float, True),
    "sfu_latency_cycles": (float, True),
    "smem_latency_cycles": (float, True),
    "l2_latency_cycles": (float, True),
    "dram_latency_cycles": (float, False),        # informational: the timing model prices L2-level round trips
    "launch_overhead_us": (float, True),
    "measured_dram_bw_gbps": (float, False),
    "measured_l2_bw_gbps": (float, False),
    "measured_fp32_tflops": (float, False),
    "measured_smem_bw_gbps": (float, False),
}
_MAX_VALUE = 2 ** 62                  # no spec number comes near it; keeps every product inside int64 and float64
# Fields that may legitimately be zero (a GPU without a driver reserve, say).
_MAY_BE_ZERO = {"smem_reserved_per_block_bytes"}
_DTYPE_TENSOR_FIELD = {"fp16": "tensor_fp16_tflops", "bf16": "tensor_bf16_tflops",
                       "tf32": "tensor_tf32_tflops", "fp8": "tensor_fp8_tflops"}


# Compute capabilities NVIDIA has shipped (CUDA C++ Programming Guide, "Compute Capabilities"); a spec with another
# is refused rather than modelled as the nearest NVIDIA chip
NVIDIA_CAPABILITIES = ("3.0", "3.2", "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5",
                       "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "10.3", "11.0", "12.0", "12.1")

@dataclass(frozen=True)
class GPUSpec:
    """A validated GPU spec. Raw YAML values are fields; SI-unit values are properties."""

    key: str                      # file stem, e.g. "h100-sxm"
    path: str
    name: str
    arch: str
    compute_capability: str
    sources: tuple[str, ...]
    sm_count: int
    clock_boost_mhz: float
    fp32_lanes_per_sm: int
    sfu_ops_per_clk_per_sm: int
    fp32_tflops: float
    dram_bytes: int
    dram_bw_gbps: float
    l2_bytes: int
    l2_bw_gbps: float
    smem_per_sm_bytes: int
    smem_per_block_optin_bytes: int
    smem_reserved_per_block_bytes: int
    smem_alloc_granularity_bytes: int
    smem_bytes_per_clk_per_sm: int
    smem_banks: int
    smem_bank_width_bytes: int
    regs_per_sm: int
    regs_per_block: int
    max_regs_per_thread: int
    reg_alloc_granularity: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    warp_size: int
    schedulers_per_sm: int
    fp32_latency_cycles: float
    sfu_latency_cycles: float
    smem_latency_cycles: float
    l2_latency_cycles: float
    launch_overhead_us: float
    aliases: tuple[str, ...] = ()
    lsu_lanes_per_clk_per_sm: int | None = None
    smem_per_block_bytes: int | None = None
    dram_latency_cycles: float | None = None
    clock_tensor_mhz: float | None = None
    tensor_fp16_tflops: float | None = None
    tensor_bf16_tflops: float | None = None
    tensor_tf32_tflops: float | None = None
    tensor_fp8_tflops: float | None = None
    tensor_fp16_acc16_tflops: float | None = None
    measured_dram_bw_gbps: float | None = None
    measured_l2_bw_gbps: float | None = None
    measured_fp32_tflops: float | None = None
    measured_smem_bw_gbps: float | None = None

    # --- SI units, converted once -------------------------------------------------------------
    @property
    def capability(self) -> tuple[int, int]:
        """The compute capability as numbers, (9, 0): compare these, never the 'sm_90' strings."""
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    @property
    def sm(self) -> str:
        """The architecture as nvcc names it: compute capability 8.6 -> 'sm_86'."""
        return "sm_" + self.compute_capability.replace(".", "")

    @property
    def clock_hz(self) -> float:
        return self.clock_boost_mhz * 1e6

    @property
    def tensor_clock_hz(self) -> float:
        """The SM clock of a kernel whose warps issue tensor-core MMAs: the datasheet's tensor clock (the one its
        tensor peaks are quoted at) where the spec gives one, else the boost clock. The power probe reads it on
        the H100 and H200 (clock64 over event time, research/data/*/probe/power.json): 1,799-1,848 MHz
        under mma.sync loads of 350-620 W with no clock limiter active, while nvidia-smi reads 1980 MHz."""
        return (self.clock_tensor_mhz or self.clock_boost_mhz) * 1e6

    @property
    def fp32_flops(self) -> float:
        """Peak FP32 FLOP/s (an FMA counts 2)."""
        return self.fp32_tflops * 1e12

    # bandwidths in B/s: dram_bw and l2_bw are the measured figure where the file has one, else the datasheet's
    dram_bw = property(lambda self: (self.measured_dram_bw_gbps or self.dram_bw_gbps) * 1e9)
    dram_bw_peak = property(lambda self: self.dram_bw_gbps * 1e9)
    l2_bw = property(lambda self: (self.measured_l2_bw_gbps or self.l2_bw_gbps) * 1e9)

    @property
    def smem_bw(self) -> float:
        """Chip-wide shared-memory bandwidth in B/s (banks x width x clock x SMs)."""
        return self.smem_bytes_per_clk_per_sm * self.sm_count * self.clock_hz

    def tensor_flops(self, dtype: str) -> float | None:
        field = _DTYPE_TENSOR_FIELD.get(dtype)
        value = getattr(self, field) if field else None
        return None if value is None else value * 1e12

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def builtin_dir() -> Path:
    """Installed: the package perfmodel.gpus. From a source tree on PYTHONPATH: the top-level gpus/ folder."""
    try:
        return Path(str(resources.files("perfmodel.gpus")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "gpus"


def builtin_specs() -> dict[str, Path]:
    """File stem -> path of every shipped spec."""
    return {p.stem: p for p in sorted(builtin_dir().glob("*.yaml"))}


def user_dirs() -> list[Path]:
    """Folders searched for users' own specs, after the built-in ones: $PERFMODEL_GPU_PATH (separated by ':'),
    then ~/.config/perfmodel/gpus (or $XDG_CONFIG_HOME/perfmodel/gpus)."""
    import os

    dirs = [Path(p) for p in os.environ.get("PERFMODEL_GPU_PATH", "").split(os.pathsep) if p]
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return dirs + [config / "perfmodel" / "gpus"]


def all_specs() -> dict[str, Path]:
    """Stem -> path of every spec a name can refer to: the built-in ones, then users' (a built-in name wins)."""
    out = {}
    for d in user_dirs():
        try:
            found = sorted(d.glob("*.yaml")) if d.is_dir() else []
        except (OSError, RuntimeError):           # an unreadable folder, a name too long: no specs from it
            found = []
        for p in found:
            out.setdefault(p.stem, p)
    out.update(builtin_specs())
    return out


def _check(raw: object, where: str) -> dict:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping of fields, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(_SCHEMA))
    if unknown:
        raise InputError(f"{where}: unknown field '{unknown[0]}'")
    out = {}
    for field, (typ, required) in _SCHEMA.items():
        if field not in raw or raw[field] is None:
            if required:
                raise InputError(f"{where}: missing field '{field}'")
            continue
        value = raw[field]
        if typ is float and isinstance(value, str):
            # YAML 1.1 reads an exponent without a dot and sign (1e12) as a string: take it as the number it writes
            try:
                value = float(value)
            except ValueError:
                pass
        if field == "compute_capability" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = f"{value:.1f}"                        # written unquoted: 9.0 (or 9)
        if typ is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif typ is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, typ)
        if not ok:
            raise InputError(f"{where}: field '{field}' must be {typ.__name__}, got {value!r}")
        if typ in (int, float):
            if not math.isfinite(value):
                raise InputError(f"{where}: field '{field}' must be a finite number, got {value!r}")
            if value < 0 or (value == 0 and field not in _MAY_BE_ZERO):
                raise InputError(f"{where}: field '{field}' must be positive, got {value!r}")
            if value > _MAX_VALUE:
                raise InputError(f"{where}: field '{field}' = {value!r} is implausibly large")
            value = typ(value)
        if typ is list:
            if not all(isinstance(v, str) for v in value):
                raise InputError(f"{where}: field '{field}' must be a list of strings")
            value = tuple(value)
        out[field] = value
    if not re.fullmatch(r"[1-9][0-9]?\.[0-9]", out["compute_capability"]):
        raise InputError(f"{where}: field 'compute_capability' must be MAJOR.MINOR (e.g. \"9.0\"), got "
                         f"{out['compute_capability']!r}")
    if out["compute_capability"] not in NVIDIA_CAPABILITIES:
        raise InputError(f"{where}: compute capability {out['compute_capability']} is no NVIDIA architecture; "
                         f"perfmodel models NVIDIA GPUs ({', '.join(NVIDIA_CAPABILITIES)})")
    if out["warp_size"] != 32:
        raise InputError(f"{where}: warp_size {out['warp_size']}: perfmodel models NVIDIA GPUs, whose warps are 32 "
                         f"threads")
    if not out["sources"]:
        raise InputError(f"{where}: field 'sources' must list at least one source")
    _consistent(out, where)
    if out["max_warps_per_sm"] * out["warp_size"] != out["max_threads_per_sm"]:
        raise InputError(f"{where}: max_threads_per_sm ({out['max_threads_per_sm']}) must equal max_warps_per_sm x "
                         f"warp_size ({out['max_warps_per_sm']} x {out['warp_size']})")
    return out


def _consistent(v: dict, where: str) -> None:
    """Ratios no GPU can have: one-line errors naming the field (a spec where no block could ever run)."""
    rules = [
        ("warp_size", v["warp_size"] == 32, "must be 32 (every NVIDIA GPU)"),
        ("schedulers_per_sm", v["schedulers_per_sm"] <= v["max_warps_per_sm"], "exceeds max_warps_per_sm"),
        ("max_threads_per_block", v["max_threads_per_block"] <= v["max_threads_per_sm"], "exceeds max_threads_per_sm"),
        ("regs_per_block", v["regs_per_block"] <= v["regs_per_sm"], "exceeds regs_per_sm"),
        ("regs_per_sm", v["regs_per_sm"] >= v["warp_size"] * v["schedulers_per_sm"] * 8,
         "is too small for one warp per scheduler"),
        ("reg_alloc_granularity", v["reg_alloc_granularity"] <= v["regs_per_sm"] // v["schedulers_per_sm"],
         "exceeds one scheduler's share of the register file"),
        ("smem_per_block_optin_bytes", v["smem_per_block_optin_bytes"] <= v["smem_per_sm_bytes"],
         "exceeds smem_per_sm_bytes"),
        ("smem_alloc_granularity_bytes", v["smem_alloc_granularity_bytes"] <= v["smem_per_sm_bytes"],
         "exceeds smem_per_sm_bytes"),
        ("clock_boost_mhz", 100 <= v["clock_boost_mhz"] <= 10_000, "must lie between 100 and 10000 MHz"),
        ("fp32_lanes_per_sm", v["fp32_lanes_per_sm"] <= 1024, "is implausibly large"),
        ("sm_count", v["sm_count"] <= 100_000, "is implausibly large"),
    ]
    for field, ok, why in rules:
        if not ok:
            raise InputError(f"{where}: field '{field}' {why}")


def load_spec_file(path: str | Path) -> GPUSpec:
    path = Path(path)
    raw = read_yaml(path, "GPU spec file")
    return GPUSpec(key=path.stem, path=str(path), **_check(raw, str(path)))


_WARNED: set = set()


def warn_bad(path, why: str) -> None:
    """One line on stderr, once per file and process, for a user's spec file that cannot be read: every other
    name keeps working."""
    import sys

    if str(path) not in _WARNED:
        _WARNED.add(str(path))
        print(f"warning: GPU spec skipped: {why if str(path) in why else f'{path}: {why}'}", file=sys.stderr)


def _alias_table() -> tuple[dict[str, str], dict[str, str]]:
    """(names and aliases -> stem, stem -> why of the users' spec files that cannot be read); built-in specs
    first, so a user's file cannot shadow them. A bad user file still answers to its stem (to say why)."""
    table: dict[str, str] = {}
    bad: dict[str, str] = {}
    specs = all_specs()
    builtin = builtin_specs()
    for stem in list(builtin) + [s for s in specs if s not in builtin]:
        table.setdefault(stem, stem)
        try:
            raw = read_yaml(specs[stem], "GPU spec file")
        except InputError as exc:
            if stem in builtin:
                raise
            bad[stem] = str(exc)
            continue
        if not isinstance(raw, dict):
            if stem not in builtin:
                bad[stem] = f"{specs[stem]}: expected a mapping of fields, got {type(raw).__name__}"
            continue
        aliases = raw.get("aliases", []) or []
        for alias in aliases if isinstance(aliases, list) else []:
            table.setdefault(str(alias).lower(), stem)
    return table, bad


def user_specs() -> list[GPUSpec]:
    """Every spec `perfmodel gpus` lists: the readable ones; each bad user file gets one warning line."""
    out = []
    builtin = builtin_specs()
    for stem, path in all_specs().items():
        try:
            out.append(load_spec_file(path))
        except InputError as exc:
            if stem in builtin:
                raise
            warn_bad(path, str(exc))
    return out


def builtin_answers(name: str) -> str | None:
    """The built-in spec that ``name`` (as `--gpu` reads it) already selects, or None."""
    table = {}
    builtin = builtin_specs()
    for stem, path in builtin.items():
        table.setdefault(stem, stem)
        raw = read_yaml(path, "GPU spec file")
        for alias in (raw.get("aliases") or []) if isinstance(raw, dict) else []:
            table.setdefault(str(alias).lower(), stem)
    key = name.strip().lower()
    return next((table[k] for k in (key, key.replace("_", "-")) if k in table), None)


def resolve(name_or_path: str) -> GPUSpec:
    """A built-in name or alias (``h100``, ``rtx3090``) or a path to a YAML file."""
    key = name_or_path.strip().lower()
    table, bad = _alias_table()
    specs = all_specs()
    for k in (key, key.replace("_", "-")):
        if k in table:
            if table[k] not in bad:
                for stem, why in bad.items():
                    warn_bad(specs[stem], why)
            return load_spec_file(specs[table[k]])
    for stem, why in bad.items():
        warn_bad(specs[stem], why)
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_spec_file(p)
    raise InputError(f"unknown GPU '{name_or_path}'; known: {', '.join(specs)} (or a path to a YAML file; "
                     f"`perfmodel gpus new NAME --from KNOWN` starts one)")


def match_device_name(device_name: str) -> GPUSpec | None:
    """The built-in spec whose ``name`` matches a CUDA device name (as recorded in a measurement row)."""
    wanted = device_name.strip().lower()
    for path in builtin_specs().values():
        spec = load_spec_file(path)
        if spec.name.lower() == wanted:
            return spec
    return None
