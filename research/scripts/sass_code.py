"""fa2_tc's instructions per warp, read off a cuobjdump listing of its compiled instances: what
perfmodel/kernels/fa2_tc.py's CODE tables hold. Per instance (d, Br, Bc, warps):

    tile     the KV loop's path for a tile without a mask (research/scripts/sass_phases.py steady_path: the loop's longest
             backward branch's body, the mask's code jumped over), the next K's copies included
    causal   the instructions a tile adds where the warp masks it in a causal launch: the mask's code runs from
             the loop's first branch on two predicates; the causal variant falls through, ending in a branch past
             the other variant (which the flag `causal` picks: UP0 in the listings)
    ragged   the same for a non-causal launch's ragged last tile: the branch to the other variant and that variant
    last     the next K's copies, which the last tile (jt = 0) skips: the loop's fourth branch jumps over them
    once     the code each warp runs once: everything before the loop and after it up to the last EXIT, less the
             block a launch without key tiles runs (a guarded branch jumps over it; it ends in a branch past the
             loop) and the call sites of the division's slow path (a guarded branch jumps over each) and that
             subroutine, which lies after the last EXIT (O's rows are divided by l, never denormal here)

A warp's instructions are then, summed over the KV tiles it walks, tile (+ causal or ragged where it masks the tile,
- last on the last tile), + once. ``enumerate_launch`` counts a launch so, warp by warp (a literal enumeration; the
model's closed form in kernels/fa2_tc.py is held to it by research/tests/test_fa2_tc_code.py); it reproduces Nsight Compute's
smsp__inst_executed.sum within 0.06% in all 14 profiled configurations (research/data/h100/ncu/
ncu_fa2_tc.csv) and each per-instruction count run (tc_sass/). The listings: research/data/h100/sass/
fa2_tc.sass (sm_90), sass_sm89/fa2_tc_sm89.sass, sass_sm80_sm86/fa2_tc_sm{80,86}.sass (research/scripts/gpu_run.sh sass-tc).

Usage: python3 research/scripts/sass_code.py LISTING.sass [...]     the five counts of every instance, as a table
"""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sass_phases  # noqa: E402

FIELDS = ("tile", "causal", "ragged", "last", "once")


def _guarded(text) -> bool:
    return text.lstrip().startswith("@")


def code(ins) -> dict:
    """The five counts (FIELDS) of one instance's listing [(address, opcode, text)]."""
    target = sass_phases.target
    start, end = sass_phases.kv_loop(ins)
    branches = [(a, t) for a, op, t in ins if start <= a <= end and op.startswith("BRA")]
    (mask, t_mask), (pick, t_pick), (past, t_past), (kskip, t_kskip) = branches[:4]
    after_mask = target(t_mask)
    assert target(t_past) == after_mask and pick - mask <= 32, "not fa2_tc's loop layout"
    real = {a: (op, t) for a, op, t in ins if not op.startswith("NOP")}
    skip = set()
    for a, (op, t) in real.items():
        # before the loop: the block a launch without key tiles runs, ending in a branch past the loop
        if a < start and op.startswith("BRA") and not _guarded(t) and (target(t) or 0) > end:
            g = max(b for b, (o, tt) in real.items() if b < a and o.startswith("BRA") and _guarded(tt))
            skip |= {x for x in real if g < x <= a}
        # after it: each call site of the slow path, which a guarded branch jumps over
        if op.startswith("CALL"):
            g = max(b for b, (o, tt) in real.items() if b < a and o.startswith("BRA") and (target(tt) or 0) > a)
            skip |= {x for x in real if g < x < target(real[g][1])}
    last_exit = min(a for a, (op, t) in real.items() if op.startswith("EXIT") and not _guarded(t) and a > end)
    return {"tile": len(sass_phases.steady_path(ins)),
            "causal": (past - mask) // 16,
            "ragged": (pick - mask) // 16 + (after_mask - target(t_pick)) // 16,
            "last": (target(t_kskip) - kskip) // 16 - 1,
            "once": sum(1 for a in real if (a < start or end < a <= last_exit) and a not in skip)}


def listing(path) -> dict:
    """(d, Br, Bc, warps) -> code(...) for every fp16 instance of a listing."""
    return {k: code(ins) for k, ins in sass_phases.instances(path).items()}


def enumerate_launch(c: dict, inst, B, H, N, causal) -> int:
    """Warp instructions of a launch, warp by warp, tile by tile, as fa2_tc.cu walks them: block q0 = Q tile q's
    first row, its KV tiles those below min(N, q0 + Br) when causal; warp w's first row q0 + w * Br/warps; a tile
    at k0 is masked when it reaches past N or (causal) past that row."""
    d, Br, Bc, W = inst
    total = 0
    for q in range(math.ceil(N / Br)):
        q0 = q * Br
        nt = math.ceil((min(N, q0 + Br) if causal else N) / Bc)
        for w in range(W):
            row = q0 + w * (Br // W)
            for jt in range(nt):
                k0 = jt * Bc
                masked = k0 + Bc > N or (causal and k0 + Bc - 1 > row)
                total += c["tile"] - (c["last"] if jt == 0 else 0)
                total += c["causal" if causal else "ragged"] if masked else 0
            total += c["once"]
    return total * B * H


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p)
        print("  (d, Br, Bc, warps): " + ", ".join(FIELDS))
        for k, c in sorted(listing(p).items()):
            print(f"  {k}: " + ", ".join(str(c[f]) for f in FIELDS))
