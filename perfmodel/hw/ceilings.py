"""The one bandwidth and throughput policy: what timing, roofline and plots take as the GPU's ceilings.

Ceilings are the calibration's achievable figures -- measured by the probe where the GPU has a calibration,
else derived from the spec sheet -- never a mix. ``basis`` says which, for every output that shows them.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.hw.calibration import Calibration
from perfmodel.hw.gpu import GPUSpec


@dataclass(frozen=True)
class Ceilings:
    fp32_flops: float        # FLOP/s (an FMA counts 2)
    dram_bps: float          # DRAM reads a second (Calibration.dram_floor_rates)
    l2_bps: float
    smem_bps: float
    tensor_flops: dict       # dtype -> FLOP/s, dense, from the spec (no probe measures it yet)
    basis: str               # "probe (FILE)" or "spec sheet"
    fp32_basis: str = ""     # how fp32_flops is made, for a figure's label

    def compute_flops(self, dtype: str) -> float:
        """The arithmetic ceiling of a kernel in this dtype: tensor cores for 16-bit types, else FP32."""
        return self.tensor_flops.get(dtype) or self.fp32_flops


def ceilings(gpu: GPUSpec, cal: Calibration) -> Ceilings:
    per_clk = gpu.sm_count * gpu.clock_hz
    tensor = {dt: gpu.tensor_flops(dt) for dt in ("fp16", "bf16") if gpu.tensor_flops(dt)}
    return Ceilings(
        fp32_flops=2 * cal.fp32_lanes_per_clk * per_clk,
        dram_bps=cal.dram_floor_rates[0],      # a stream of reads: a copy's where no probe read one
        l2_bps=cal.l2_bw_bps,
        smem_bps=cal.smem_wavefronts_per_clk * gpu.smem_banks * gpu.smem_bank_width_bytes * per_clk,
        tensor_flops=tensor,
        # an unprobed GPU's calibration is its spec sheet and its architecture's constants ("spec + sm_86 ...")
        basis=cal.source.replace("spec", "spec sheet", 1) if cal.basis == "spec" else f"probe ({cal.source})",
        fp32_basis=(f"2 x {cal.fp32_lanes_per_clk:.4g} of {gpu.fp32_lanes_per_sm} lanes/SM "
                    f"({'probed' if cal.basis == 'probe' else 'architecture constant'})\nx {gpu.sm_count} SMs x "
                    f"{gpu.clock_boost_mhz:g} MHz boost; datasheet {gpu.fp32_tflops:g} TFLOP/s"),
    )
