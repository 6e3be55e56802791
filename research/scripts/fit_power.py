"""The power model's energies, from the power probe's loads (nothing here reads a FlashAttention timing).

    python3 research/scripts/fit_power.py [h100] [--write CAL.yaml]

Reads research/data/<gpu>/probe/power-random.json (research/scripts/probe_power.py: each pipe's load, random
switching operands, L2 reads that bypass L1, DRAM reads, for 3 s each while nvidia-smi samples the power),
power.json (the DRAM fill that the bench's L2 flush is, and the idle GPU) and wgmma.json (warpgroup MMAs on
random data at the power limit). Fits, by least squares over the kernels' loads,

    P = idle_w + (f / ref_clock)^alpha * sum_i energy_i * rate_i

(rate_i: operations or bytes a second; f: the clock the kernel counted, clock64 over its event time, or the boost
clock for loads without one; alpha: an operation's energy grows with the voltage squared, and the voltage with the
clock: alpha = 2, which the fit's residual prefers over 1.5 and 2.5). The loads that drew the limit (the software
power cap's reason set) are in the fit too: their power is the limit, at the clock they ran at. A warpgroup MMA's
energy is what the wgmma probe's sustained run leaves beyond idle_w at its clock, scaled to ref_clock. The bench's
gap between timed runs (two head-start spins and the L2 flush: perfmodel.measure.bench) is priced at the idle
GPU's and the DRAM fill's power.

``--write CAL.yaml`` puts the result, as the ``power`` block, into that calibration file (the shipped
gpus/calibration/h100-sxm.yaml and h200.yaml hold theirs): the model then holds the clock of each launch priced
from probes alone to the power limit (perfmodel.model.power, model.timing). Kernels with fitted path costs keep
their clock: refitted under the limit, fa2_tc's ranking of tiles scored worse on held-out rows
(research/notes/known-gaps-log.md, the power model). Run from the repository root.
"""
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel import api  # noqa: E402
from perfmodel.measure.bench import FLUSH_BYTES, HEAD_START_S  # noqa: E402

ALPHA = 2.0
# energy name -> (the probe's rate key, random operands or None for either)
TERMS = {"mma_nj": ("mma", True), "mma_fixed_nj": ("mma", False), "ldsm_nj": ("ldmatrix_x4", None),
         "sfu_nj": ("ex2", None), "fp32_nj": ("ffma", None), "l2_pj_per_byte": ("l2_read_bytes", None),
         "l1_pj_per_byte": ("l1_read_bytes", None), "dram_pj_per_byte": ("dram_read_bytes", None)}


def unit(term: str) -> float:
    """A rate times this, times the energy in the term's unit (nJ, pJ), is watts."""
    return 1e-12 if term.endswith("pj_per_byte") else 1e-9


def probe_dir(gpu: str) -> Path:
    return ROOT / "research" / "data" / gpu / "probe"


def cases(gpu: str) -> list[dict]:
    """The kernel loads of power-random.json: name, power (nvidia-smi's average), clock, rates, limit."""
    raw = json.loads((probe_dir(gpu) / "power-random.json").read_text())["cases"]
    out = []
    for name, rec in raw.items():
        med = rec.get("median")
        if not med or not rec.get("launches"):
            continue
        rnd = bool(rec.get("random_operands"))
        ops = med.get("ops_per_s", {})
        rates = {}
        for term, (key, operands) in TERMS.items():
            take = operands is None or operands == rnd
            rates[term] = float(ops.get(key, 0.0)) * unit(term) if take else 0.0
        out.append({"name": name, "power_w": med["power_avg_w"], "clock_mhz": rec.get("kernel_clock_mhz_last") or
                    med["sm_clock_mhz"], "rates": rates, "limit_w": med["power_limit_w"]})
    return out


def fit(gpu: str = "h100", alpha: float = ALPHA) -> dict:
    """The energies (by least squares over the kernel loads) at the clock the model times tensor-core kernels at
    (GPUSpec.tensor_clock_hz), their residuals and the gap's power."""
    ref = api.load_gpu(gpu).tensor_clock_hz / 1e6
    rows = cases(gpu)
    names = list(TERMS)
    a = np.array([[1.0] + [r["rates"][t] * (r["clock_mhz"] / ref) ** alpha for t in names] for r in rows])
    y = np.array([r["power_w"] for r in rows])
    sol = np.linalg.lstsq(a, y, rcond=None)[0]
    resid = a @ sol - y
    energies = {t: float(v) for t, v in zip(names, sol[1:])}
    idle_w = float(sol[0])
    wg = json.loads((probe_dir(gpu) / "wgmma.json").read_text())["sustained"]
    run = next(v for k, v in wg.items() if k.startswith("wgmma"))
    f = run["clock_mhz_seen_median"]
    per_s = run["tflops_median"] * 1e12 / 4096                        # m16n8k16 equivalents a second
    wgmma_nj = (run["nvidia_smi"]["power_w_median"] - idle_w) / per_s / (f / ref) ** alpha * 1e9
    base = json.loads((probe_dir(gpu) / "power.json").read_text())["cases"]
    idle_gpu_w = base["idle"]["median"]["power_w"]
    fill = base["dram_fill"]["median"]
    fill_s = FLUSH_BYTES / fill["ops_per_s"]["dram_write_bytes"]
    gap_s = 2 * HEAD_START_S + fill_s
    gap_w = (idle_gpu_w * 2 * HEAD_START_S + fill["power_w"] * fill_s) / gap_s
    limit = float(np.median([r["limit_w"] for r in rows]))
    return {"energies": energies, "idle_w": idle_w, "wgmma_nj": float(wgmma_nj), "gap_s": gap_s, "gap_w": gap_w,
            "limit_w": limit, "ref_clock_mhz": ref, "alpha": alpha, "rms_w": float(np.sqrt(np.mean(resid ** 2))),
            "residuals": {r["name"]: float(e) for r, e in zip(rows, resid)}}


# the power block's fields (perfmodel.model.power.FIELDS) as the fit gives them, each with its note in the file
NOTES = {"mma_nj": "mma.sync m16n8k16 on random operands that switch",
         "wgmma_nj": "warpgroup MMA, per m16n8k16 equivalent (4096 FLOPs)", "ldsm_nj": "ldmatrix.x4 of random data",
         "sfu_nj": "MUFU.EX2", "fp32_nj": "FFMA (a warp instruction)", "l2_pj_per_byte": "read from L2 (ld.global.cg)",
         "dram_pj_per_byte": "read from DRAM (through L2)",
         "gap_s": "between two timed runs: two head-start spins and the L2 flush",
         "gap_w": "the idle GPU's and the DRAM fill's power over that gap"}


def fields(res: dict) -> dict:
    """The power block of a fit: field -> value (perfmodel.model.power.FIELDS)."""
    e = res["energies"]
    return {"limit_w": res["limit_w"], "idle_w": res["idle_w"], "ref_clock_mhz": res["ref_clock_mhz"],
            "alpha": res["alpha"], "mma_nj": e["mma_nj"], "wgmma_nj": res["wgmma_nj"], "ldsm_nj": e["ldsm_nj"],
            "sfu_nj": e["sfu_nj"], "fp32_nj": e["fp32_nj"], "l2_pj_per_byte": e["l2_pj_per_byte"],
            "dram_pj_per_byte": e["dram_pj_per_byte"], "gap_s": res["gap_s"], "gap_w": res["gap_w"]}


def block(res: dict, gpu: str) -> str:
    lines = [
        "power:",
        f"  # fitted by research/scripts/fit_power.py from research/data/{gpu}/probe/power-random.json (and power.json,"
        " wgmma.json);",
        f"  # {len(res['residuals'])} loads, rms residual {res['rms_w']:.1f} W. Energies at ref_clock_mhz; an operation's"
        " energy scales as (f / ref)^alpha",
    ]
    for k, v in fields(res).items():
        value = f"{v:.3e}" if k == "gap_s" else f"{v:.4f}" if k.endswith("_nj") else f"{v:.2f}"
        lines.append(f"  {k}: {value}" + (f"    # {NOTES[k]}" if k in NOTES else ""))
    return "\n".join(lines) + "\n"


def write(res: dict, gpu: str, path: Path) -> None:
    """The power block into the calibration file ``path`` (replacing one it has)."""
    text = re.sub(r"^power:\n(?:[ #].*\n)*", "", path.read_text(), flags=re.M)
    path.write_text(text.rstrip("\n") + "\n" + block(res, gpu))


def main(argv):
    gpu = next((a for a in argv if not a.startswith("--") and not a.endswith(".yaml")), "h100")
    res = fit(gpu)
    print(block(res, gpu), end="")
    print("residuals (fit - measured, W):")
    for k, v in res["residuals"].items():
        print(f"  {k:20s} {v:+6.1f}")
    if "--write" in argv:
        path = Path(argv[argv.index("--write") + 1])
        write(res, gpu, path)
        print("wrote the power block into", path)


if __name__ == "__main__":
    main(sys.argv[1:])
