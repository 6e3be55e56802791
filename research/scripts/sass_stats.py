"""Instruction counts per fa2_tc kernel instance from cuobjdump -sass listings, to compare architectures' builds.
Usage: python3 research/scripts/sass_stats.py NAME=FILE.sass [NAME=FILE.sass ...]
(sm_80/sm_86 listings: nvcc -arch=sm_80 -O3 -cubin perfmodel/kernels/csrc/fa2_tc.cu, then cuobjdump -sass on a
machine that has it.)"""
import re
import sys

from sass_loops import instruction

OPS = ("HMMA", "LDSM", "MUFU", "FMNMX", "F2FP", "SHFL", "BAR", "LDGSTS")


def functions(path):
    cur, out = None, {}
    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif cur and (ins := instruction(line)):
            out[cur].append(ins[1])
    return out


def instance(name):
    m = re.search(r"fa2_tc_kernelI(6__half|13__nv_bfloat16)Li(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E", name)
    return None if not m else ("fp16" if "half" in m.group(1) else "bf16",) + tuple(int(x) for x in m.groups()[1:])


def main(args):
    builds = {a.split("=", 1)[0]: functions(a.split("=", 1)[1]) for a in args}
    rows = {}
    for arch, fns in builds.items():
        for name, ops in fns.items():
            key = instance(name)
            if key and key[0] == "fp16":
                rows.setdefault(key, {})[arch] = [len(ops)] + [sum(o.startswith(p) for o in ops) for p in OPS]
    print("instance (dtype, d, Br, Bc, warps) | " + " | ".join(f"{a}: total/{'/'.join(OPS)}" for a in builds))
    for key in sorted(rows):
        print(key, " | ".join("/".join(map(str, rows[key].get(a, []))) for a in builds))


if __name__ == "__main__":
    main(sys.argv[1:])
