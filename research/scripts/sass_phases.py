"""Where each fa2_tc instance's compiled KV loop waits for its tile loads and issues them, beside its softmax.

The source (csrc/fa2_tc.cu) runs the softmax before it waits for V, and issues the next K after that wait, so that
V's load is in flight during QK^T and the softmax. The compiler may move register-only work across the wait: this
reads, from a cuobjdump listing, the loop's steady-state path (the longest backward branch's body; the mask's code,
which the first two-predicate branch skips, left out) and reports, in program order, where the V wait (the second
DEPBAR), the softmax's MUFU.EX2 and the next K's cp.async (LDGSTS after the V wait) lie. The warp issues in order,
so a MUFU after the V wait cannot run while V is in flight, and one before the next K's copies not while K is.
research/tests/test_sass_phases.py checks the committed listings. The model keeps the source's order
(FA2TC.softmax_overlaps_load); research/scripts/try_fa2_tc_form.py compiled-order scores the compiled one, which was not
shipped.

Usage:
  python3 research/scripts/sass_phases.py LISTING.sass [...]          the order, per instance
  python3 research/scripts/sass_phases.py --build BUILD OUT.sass [SM]  compile fa2_tc.cu as the measured build (BUILD=measured)
                                                             or the phase-trace build (BUILD=phase) for sm_SM (90
                                                             unless given) with torch's extension flags, and write
                                                             its listing (the measured build's every head dimension,
                                                             the phase build's d 64 and 128; nvcc and cuobjdump on
                                                             PATH; no GPU used)
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "research" / "scripts"))
import sass_loops  # noqa: E402

# torch.utils.cpp_extension's flags for a CUDA source (torch 2.11, sm_90), as the builds use them
NVCC_FLAGS = ["-std=c++17", "-O3", "-D__CUDA_NO_HALF_OPERATORS__",
              "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
              "--expt-relaxed-constexpr"]
BUILDS = {"measured": ["-lineinfo"], "phase": ["-DFA2TC_TRACE=1", "-DFA2TC_PHASES=1"]}


def instances(path) -> dict:
    """(d, Br, Bc, warps) -> [(address, opcode, text)] of each fp16 fa2_tc function of a cuobjdump listing."""
    out, cur = {}, None
    for line in open(path):
        if "Function : " in line:
            m = sass_loops.FA2TC_NAME.search(line)
            cur = tuple(int(m.group(i)) for i in range(2, 6)) if m and m.group(1) == "6__half" else None
            if cur:
                out[cur] = []
            continue
        ins = sass_loops.instruction(line)
        if ins and cur:
            out[cur].append(ins)
    return out


def target(text):
    m = re.search(r"0x([0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


def kv_loop(ins) -> tuple[int, int]:
    """(first, last address) of an instance's KV loop: its longest backward branch's target and that branch."""
    loops = [(target(t), a) for a, op, t in ins if op.startswith("BRA") and target(t) is not None and target(t) < a]
    return max(loops, key=lambda se: se[1] - se[0])


def steady_path(ins) -> list:
    """Opcodes of the KV loop's path for a tile without masking: from the longest backward branch's target to the
    branch, jumping over the mask's code (the loop's first branch on two predicates) and along unconditional
    branches; other conditional branches (the last tile's skipped K copy) fall through."""
    start, end = kv_loop(ins)
    at = {a: (op, t) for a, op, t in ins}
    path, a, skipped = [], start, False
    while a <= end:
        op, t = at[a]
        path.append(op)
        if op.startswith("BRA") and a != end:
            guarded = t.lstrip().startswith("@")
            two = re.search(r"BRA\s+!?P\d", t) is not None
            if two and not skipped:
                skipped = True
                a = target(t)
                continue
            if not guarded and not two:
                a = target(t)
                continue
        a += 16
    return path


def order(path) -> dict:
    """Counts, in program order, of the softmax's exponentials and the GEMMs' MMAs before the V wait and before the
    next K's copies."""
    dep = [i for i, op in enumerate(path) if op.startswith("DEPBAR")]
    v_wait = dep[1]
    k_copy = next(i for i, op in enumerate(path) if op.startswith("LDGSTS") and i > v_wait)
    mufu = [i for i, op in enumerate(path) if op.startswith("MUFU")]
    mma = [i for i, op in enumerate(path) if op.startswith("HMMA")]
    before = lambda xs, at: sum(x < at for x in xs)
    return {"mufu": len(mufu), "mma": len(mma), "mufu_before_v_wait": before(mufu, v_wait),
            "mma_before_v_wait": before(mma, v_wait), "mufu_before_k_copy": before(mufu, k_copy),
            "mma_before_k_copy": before(mma, k_copy),
            # the softmax runs while a load is in flight: before the V wait, or after the next K's copies
            "softmax_overlaps_load": before(mufu, v_wait) > 0 or before(mufu, k_copy) < len(mufu)}


def build(kind: str, out: Path, sm: str = "90") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "fa2_tc.cubin"
        cmd = ["nvcc", "-cubin", "-o", str(cubin)] + NVCC_FLAGS + [f"-gencode=arch=compute_{sm},code=sm_{sm}"] + \
            BUILDS[kind] + [str(ROOT / "perfmodel" / "kernels" / "csrc" / "fa2_tc.cu")]
        subprocess.run(cmd, check=True)
        dump = subprocess.run(["cuobjdump", "--dump-sass", str(cubin)], check=True, capture_output=True,
                              text=True).stdout
    flags = " ".join(["nvcc", "-cubin", "fa2_tc.cubin"] + cmd[4:-1])
    title = f"{flags} perfmodel/kernels/csrc/fa2_tc.cu; cuobjdump --dump-sass"
    keep = (32, 64, 128, 256) if kind == "measured" else (64, 128)
    sass_loops.write_fa2_tc_listing(sass_loops.fa2_tc_functions(dump), out, title, keep_ds=keep)
    print(f"wrote {out}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--build"]:
        build(sys.argv[2], Path(sys.argv[3]), *sys.argv[4:5])
        sys.exit(0)
    for p in sys.argv[1:]:
        print(p)
        for k, ins in sorted(instances(p).items()):
            o = order(steady_path(ins))
            print(f"  d={k[0]:3d} {k[1]:3d}x{k[2]:<3d}/{k[3]}w  V wait after {o['mufu_before_v_wait']:3d}/{o['mufu']} "
                  f"exponentials, {o['mma_before_v_wait']:3d}/{o['mma']} MMAs; next K's copies after "
                  f"{o['mufu_before_k_copy']:3d}/{o['mufu']} exponentials -> softmax overlaps a load: "
                  f"{'yes' if o['softmax_overlaps_load'] else 'no'}")
