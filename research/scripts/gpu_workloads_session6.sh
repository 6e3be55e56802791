#!/usr/bin/env bash
# The sixth GPU session's first call (2026-12-02): the FP32-kinds probe (research/scripts/probe_fp32_kinds.py: do
# FlashAttention-2's predicated-off FMULs, its FMNMX and its exp2f share mma.sync's time as FFMA does?) with the SASS
# of its build, then a check set at d = 32 for both SDPA presets (examples/grids/h200-d32.yaml); all lands in OUT.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session6.sh OUT
# (The probe's first runs read 0 cycles: its module had been built for nvcc's default sm_75, an empty body; the
# record is from the run after 4532b44 named the target.)
W=/tmp/session6
source research/scripts/gpu_session_common.sh
step 300 python3 research/scripts/probe_fp32_kinds.py "$out/fp32_kinds.json"
d=$(ls -td ~/.cache/perfmodel/fp32_kinds_*/ 2>/dev/null | head -1)
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
[ -n "$d" ] && [ -n "$CUOBJDUMP" ] && "$CUOBJDUMP" -sass "$d"/*.so \
    | grep -E "FMUL|FMNMX|FSETP|MUFU|FFMA|HMMA|ISETP|BRA|FADD" | sed 's/^ *//' > "$out/fp32_kinds.sass.txt"
measure_sdpa h200-d32 "$out" d32
cp "$W/device.txt" "$out/device.txt"
ls -la "$out"
