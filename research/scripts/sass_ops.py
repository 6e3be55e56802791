"""Count the softmax's instructions in fa2_tc builds' listings: each extension module built (the measured build's
and research/csrc's fa2_tc variants) disassembled with cuobjdump into FOLDER, then for each listing the bf16 fa2_tc
instances at SDPA flash's tiles (d 32 and 64: 128 x 128 / 4 warps; d 128: 128 x 64 / 4), one line each.

    python3 research/scripts/sass_ops.py FOLDER > FOLDER/sass_ops.txt

(research/scripts/gpu_workloads_session7.sh runs it; research/tests/test_noftz.py reads its lines)."""

import os
import pathlib
import re
import subprocess
import sys

INSTANCES = {("32", "128", "128", "4"), ("64", "128", "128", "4"), ("128", "128", "64", "4")}
KEEP = ("HMMA", "MUFU", "FSETP", "FMUL", "FFMA", "FADD", "FMNMX", "FSEL", "LDSM")


def dump(folder):
    """cuobjdump -sass of every built module of the kernels or an fa2_tc variant, into FOLDER/<build>.sass."""
    root = pathlib.Path(os.environ.get("PERFMODEL_BUILD_DIR", pathlib.Path.home() / ".cache" / "perfmodel"))
    for so in sorted(root.rglob("*.so")):
        if re.search(r"noftz|flashexp|kernels", str(so)):
            sass = subprocess.run(["cuobjdump", "-sass", str(so)], capture_output=True, text=True).stdout
            (pathlib.Path(folder) / f"{so.parent.name}.sass").write_text(sass)


def main(folder):
    dump(folder)
    for f in sorted(pathlib.Path(folder).glob("*.sass")):
        for fn in re.split(r"\n\s+Function : ", f.read_text())[1:]:
            name = fn.split("\n")[0]
            if "fa2_tc_kernel" not in name or "bfloat" not in name:
                continue
            inst = tuple(re.findall(r"Li(\d+)E", name))
            if inst not in INSTANCES:
                continue
            ops = {}
            for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", fn):
                ops[m.group(1)] = ops.get(m.group(1), 0) + 1
            print(f.name, "x".join(inst), " ".join(f"{k}={ops.get(k, 0)}" for k in KEEP), "total", sum(ops.values()))


if __name__ == "__main__":
    main(sys.argv[1])
