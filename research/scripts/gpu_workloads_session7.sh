#!/usr/bin/env bash
# The seventh GPU session's calls (2026-12-02): fa2_tc compiled with SDPA flash's exponential (no ftz), timed beside
# the measured build and SDPA flash (research/scripts/fa2_tc_noftz.py); with RUN=fa2_tc_flashexp, the no-ftz build
# with each score's FFMA split as flash's is, beside both (research/scripts/fa2_tc_flashexp.py). The builds'
# instruction mixes counted off their SASS. Packed into OUT/$RUN.tgz.
# Run from the repository root on the GPU: [RUN=fa2_tc_flashexp] bash research/scripts/gpu_workloads_session7.sh OUT
RUN=${RUN:-fa2_tc_noftz}
W=/tmp/$RUN
source research/scripts/gpu_session_common.sh
step 560 python3 research/scripts/$RUN.py "$W/$RUN.json"
# the loop's instruction mix of each build's bf16 instances at SDPA flash's tiles
python3 research/scripts/sass_ops.py "$W" > "$W/sass_ops.txt"
cat "$W/sass_ops.txt"
(cd "$W" && tar czf "$out/$RUN.tgz" --exclude='*.sass' .)
cp "$W/$RUN.json" "$out/" 2>/dev/null
ls -la "$out"
