#!/usr/bin/env bash
# The seventh GPU session's call (2026-12-02): fa2_tc compiled with SDPA flash's exponential (no ftz), timed beside
# the measured build and SDPA flash (research/scripts/fa2_tc_noftz.py), and the three FP32-class instructions it adds
# a score counted off both builds' SASS. Packed into OUT/session7.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session7.sh OUT
W=/tmp/session7
source research/scripts/gpu_session_common.sh
step 560 python3 research/scripts/fa2_tc_noftz.py "$W/fa2_tc_noftz.json"
# the loop's instruction mix of each build's bf16 instances at SDPA flash's tiles
for so in $(find "${PERFMODEL_BUILD_DIR:-$HOME/.cache/perfmodel}" -name '*.so' | grep -E 'fa2|noftz|kernels'); do
  cuobjdump -sass "$so" > "$W/$(basename "$(dirname "$so")").sass" 2>/dev/null || echo "no cuobjdump for $so"
done
python3 - "$W" <<'PY' > "$W/sass_ops.txt"
import re, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.sass")):
    for fn in re.split(r"\n\s+Function : ", f.read_text())[1:]:
        name = fn.split("\n")[0]
        if "fa2_tc_kernel" not in name or "bfloat" not in name:
            continue
        inst = tuple(re.findall(r"Li(\d+)E", name))
        if inst not in {("32", "128", "128", "4"), ("64", "128", "128", "4"), ("128", "128", "64", "4")}:
            continue
        ops = {}
        for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", fn):
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
        keep = ("HMMA", "MUFU", "FSETP", "FMUL", "FFMA", "FADD", "FMNMX", "FSEL", "LDSM")
        print(f.name, "x".join(inst), " ".join(f"{k}={ops.get(k, 0)}" for k in keep), "total", sum(ops.values()))
PY
cat "$W/sass_ops.txt"
(cd "$W" && tar czf "$out/session7.tgz" --exclude='*.sass' .)
cp "$W/fa2_tc_noftz.json" "$out/" 2>/dev/null
ls -la "$out"
