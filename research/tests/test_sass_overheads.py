"""The per-step instruction overheads of fa1 and fa2 (perfmodel/kernels/fa*.py, ARCH) are what their SASS says:
for each overhead, the unrolled loop body it is read off has that many instructions beyond the arithmetic and
memory ones the model counts (research/scripts/sass_loops.py), per step the body covers. sm_90: the listings of the
measured H100 builds; sm_80 and sm_86: builds of the same sources with nvcc 13.0 -O3, disassembled on the lent
machine (no such GPU is measured here); sm_89: the same, its listings the sm_86 ones instruction for instruction."""
import re
import subprocess
from pathlib import Path

import pytest
from rutil import script

from perfmodel.kernels import get

ROOT = Path(__file__).resolve().parents[2]
sass_loops = script("sass_loops")

LISTING = {
    "sm_90": "research/data/h100/sass/{k}.sass",
    "sm_80": "research/data/sass_sm80_sm86/{k}_sm80.sass",
    "sm_86": "research/data/sass_sm80_sm86/{k}_sm86.sass",
    "sm_89": "research/data/sass_sm89/{k}_sm89.sass",
}
# overhead -> ((loop start per architecture), steps the unrolled body covers); several starts: loops the overhead
# stands for alike (fa2's row reductions P3 and P5)
LOOPS = {
    "fa1": {
        "qk_step": ({"sm_90": [0x2ac0], "sm_80": [0x25a0], "sm_86": [0x2520]}, 16),
        "pv_step": ({"sm_90": [0x4b40], "sm_80": [0x41f0], "sm_86": [0x4130]}, 16),
        "qload_step": ({"sm_90": [0x1840], "sm_80": [0x1630], "sm_86": [0x15c0]}, 16),
        "kvload_step": ({"sm_90": [0x0910], "sm_80": [0x0870], "sm_86": [0x07c0]}, 16),
        "exp_step": ({"sm_90": [0x3720], "sm_80": [0x2f30], "sm_86": [0x2e80]}, 4),
    },
    "fa2": {
        "p1_chunk": ({"sm_90": [0x21a0], "sm_80": [0x2120], "sm_86": [0x2090]}, 16),
        "p2_step": ({"sm_90": [0x37e0], "sm_80": [0x3570], "sm_86": [0x34e0]}, 16),
        "row_step": ({"sm_90": [0x4b70, 0x5f20], "sm_80": [0x46a0, 0x58c0], "sm_86": [0x4670, 0x58e0]}, 16),
        "p4_chunk": ({"sm_90": [0x4700], "sm_80": [0x4210], "sm_86": [0x41e0]}, 4),
        "p6_step": ({"sm_90": [0x6c50], "sm_80": [0x64f0], "sm_86": [0x6510]}, 16),
        "prologue": ({"sm_90": [0x0860], "sm_80": [0x07b0], "sm_86": [0x07b0]}, 16),
        "epilogue": ({"sm_90": [0x7e40], "sm_80": [0x7610], "sm_86": [0x7690]}, 16),
    },
}
# sm_89's builds are sm_86's listings, at the same addresses (test_sm89_builds_are_the_sm86_ones)
for _loops in LOOPS.values():
    for _starts, _ in _loops.values():
        _starts["sm_89"] = _starts["sm_86"]


@pytest.mark.parametrize("kernel", sorted(LOOPS))
@pytest.mark.parametrize("arch", sorted(LISTING))
def test_overheads_are_read_off_the_sass(kernel, arch):
    listing = ROOT / LISTING[arch].format(k=kernel)
    facts = get(kernel).arch[arch]
    for name, (starts, steps) in LOOPS[kernel].items():
        for start in starts[arch]:
            n, counted = sass_loops.loops(listing)[start]
            assert counted.total() - counted["rest"] >= steps          # the body holds the counted work of each step
            assert facts.overheads[name] * steps == pytest.approx(sass_loops.overhead(listing, start)), (name, start)


@pytest.mark.parametrize("kernel", sorted(LOOPS))
def test_architectures_share_the_counted_work(kernel):
    """The arithmetic and memory instructions of each loop body are the same on every architecture: only the
    overheads differ."""
    counts = {arch: [sass_loops.loops(ROOT / LISTING[arch].format(k=kernel))[s][1]
                     for starts, _ in LOOPS[kernel].values() for s in starts[arch]] for arch in LISTING}
    strip = lambda c: {k: v for k, v in c.items() if k != "rest"}
    for arch in LISTING:
        assert [strip(c) for c in counts[arch]] == [strip(c) for c in counts["sm_90"]], arch


@pytest.mark.parametrize("kernel", sorted(LOOPS))
def test_sm89_builds_are_the_sm86_ones(kernel):
    """Why sm_89's facts are sm_86's: the listings differ only in the target's name."""
    text = lambda arch: (ROOT / LISTING[arch].format(k=kernel)).read_text().replace(arch, "sm").replace(
        arch.replace("_", "").upper(), "SM")
    assert text("sm_89") == text("sm_86")
    assert get(kernel).arch["sm_89"].overheads == get(kernel).arch["sm_86"].overheads
    assert get(kernel).arch["sm_89"].regs == get(kernel).arch["sm_86"].regs


@pytest.mark.parametrize("kernel", sorted(LOOPS))
@pytest.mark.parametrize("arch", sorted(LISTING))
def test_registers_are_ptxas(kernel, arch, tmp_path):
    """Registers per thread as ptxas reports them for each build (skipped without nvcc)."""
    import shutil

    if not shutil.which("nvcc"):
        pytest.skip("nvcc not on PATH")
    out = subprocess.run(["nvcc", f"-arch={arch}", "-O3", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"),
                          str(ROOT / "perfmodel" / "kernels" / "csrc" / f"{kernel}.cu")],
                         capture_output=True, text=True)
    used = re.search(r"Used (\d+) registers", out.stderr)
    assert used and int(used.group(1)) == get(kernel).arch[arch].regs


@pytest.mark.parametrize("arch,listing", [("sm_90", "h100/sass/fa2_tc.sass"),
                                          ("sm_89", "sass_sm89/fa2_tc_sm89.sass")])
def test_fa2_tc_spills_are_read_off_its_loop(arch, listing, tmp_path):
    """fa2_tc's instance_spills (SPILLS on sm_90, SPILLS_SM8X on sm_80/86/89): the LDL and STL inside each
    instance's KV loop (its longest loop) in the committed listing; every other instance has none there."""
    spills = get("fa2_tc").arch[arch].instance_spills
    assert spills

    funcs, cur = {}, None
    for line in (ROOT / "research" / "data" / listing).read_text().splitlines():
        m = re.search(r"Function : \S*fa2_tc_kernelI6__halfLi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E", line)
        if "Function :" in line:
            cur = tuple(int(x) for x in m.groups()) if m else None
            if cur:
                funcs[cur] = []
        elif cur:
            funcs[cur].append(line)
    assert len(funcs) >= 14
    for inst, lines in funcs.items():
        path = tmp_path / "f.sass"
        path.write_text("\n".join(lines))
        start, (n, _) = max(sass_loops.loops(path).items(), key=lambda kv: kv[1][0])
        body = [op for a, op, _ in sass_loops.instructions(path) if start <= a < start + 16 * n]
        got = (sum(op.startswith("LDL") for op in body), sum(op.startswith("STL") for op in body))
        assert got == spills.get(inst, (0, 0)), (inst, got)
