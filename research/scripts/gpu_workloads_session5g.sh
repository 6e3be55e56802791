#!/usr/bin/env bash
# The fifth GPU session's seventh call (2026-12-02): the SDPA presets at head dims no grid held before
# (examples/grids/h200-headdims3.yaml: d 48, 112, 160, 192, 200), timed after the model's head-dim mechanisms were
# read off d 32-256, as a check on them; the CSVs land in OUT.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5g.sh OUT
W=/tmp/session5g
source research/scripts/gpu_session_common.sh
measure_sdpa h200-headdims3 "$out" headdims3
cp "$W/device.txt" "$out/device.txt"
ls -la "$out"
