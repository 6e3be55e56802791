"""The loops of a cuobjdump -sass listing: every backward branch closes one, from its target to the branch. For each
loop: its instructions, the arithmetic and memory ones the model counts (COUNTED), and the rest (address
arithmetic, loop control, predicates): the per-step overheads of perfmodel/kernels/fa1.py and fa2.py are that rest
over the steps an unrolled body covers. research/tests/test_sass_overheads.py checks them against the committed listings.
Usage: python3 research/scripts/sass_loops.py FILE.sass [FILE.sass ...]
(listings for sm_80/sm_86 without a GPU: nvcc -arch=sm_80 -O3 -cubin perfmodel/kernels/csrc/fa1.cu, then
cuobjdump -sass on a machine that has it)"""
import collections
import re
import sys

COUNTED = ("FFMA", "FMUL", "FADD", "FMNMX", "MUFU", "LDS", "STS", "LDG", "STG")


def instruction(line):
    """(address, opcode, text) of a listing line that holds an instruction, else None (a predicate is not part of
    the opcode)."""
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if not m:
        return None
    words = m.group(2).split()
    return int(m.group(1), 16), (words[1] if words[0].startswith("@") else words[0]), m.group(2)


def instructions(path):
    """(address, opcode, text) of every instruction of the listing."""
    return [i for i in map(instruction, open(path)) if i]


def loops(path) -> dict:
    """start address -> (instructions in the loop, Counter of COUNTED opcodes), for every backward branch."""
    ins = instructions(path)
    out = {}
    for addr, op, text in ins:
        m = re.search(r"0x([0-9a-f]+)", text) if op.startswith("BRA") else None
        if m and int(m.group(1), 16) <= addr:
            start = int(m.group(1), 16)
            body = [o for a, o, _ in ins if start <= a <= addr]
            out[start] = (len(body), collections.Counter(next((c for c in COUNTED if o.startswith(c)), "rest")
                                                         for o in body))
    return out


FA2TC_NAME = re.compile(r"fa2_tc_kernelI(6__half|13__nv_bfloat16)Li(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E")
ENCODING = re.compile(r"^\s*/\* 0x[0-9a-f]{16} \*/\s*$")


def fa2_tc_functions(dump: str) -> dict:
    """cuobjdump --dump-sass text -> {function name: its listing lines, encodings stripped}, fa2_tc's kernels only."""
    funcs, cur = {}, None
    for line in dump.splitlines():
        if "Function : " in line:
            name = line.split("Function : ")[1].strip()
            cur = name if FA2TC_NAME.search(name) else None
            if cur:
                funcs[cur] = []
            continue
        if cur is None or ENCODING.match(line):
            continue
        if line.strip().startswith(".") or line.strip().startswith("/*"):
            funcs[cur].append(re.sub(r"\s*/\* 0x[0-9a-f]{16} \*/\s*$", "", line.rstrip()))
    return funcs


def write_fa2_tc_listing(funcs: dict, path, title: str, keep_ds=(64, 128)) -> None:
    """The fp16 instances of head dims ``keep_ds``, each after a line naming it (d, Br, Bc, warps)."""
    keep = []
    for name, lines in funcs.items():
        m = FA2TC_NAME.search(name)
        if m.group(1) == "6__half" and int(m.group(2)) in keep_ds:
            keep.append(tuple(int(m.group(i)) for i in range(2, 6)) + (name, lines))
    with open(path, "w") as f:
        f.write(f"// {title}: the fp16 fa2_tc kernels, d in {list(keep_ds)}; encodings stripped. Instance (d, Br, Bc, "
                f"warps) before each function.\n")
        for d, br, bc, w, name, lines in sorted(keep):
            f.write(f"\n// ==== fa2_tc fp16 d={d} Br={br} Bc={bc} warps={w}\n\t\tFunction : {name}\n")
            f.write("\n".join(lines) + "\n")


def overhead(path, start: int) -> int:
    """Instructions of the loop at ``start`` beyond the COUNTED ones."""
    n, c = loops(path)[start]
    return n - sum(c[k] for k in COUNTED)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p)
        for start, (n, c) in loops(p).items():
            print(f"  0x{start:05x} {n:5d} instructions, {n - sum(c[k] for k in COUNTED):4d} beyond "
                  + " ".join(f"{k}:{c[k]}" for k in COUNTED if c[k]))
