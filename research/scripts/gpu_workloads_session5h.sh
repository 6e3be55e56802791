#!/usr/bin/env bash
# The fifth GPU session's eighth call (2026-12-02): which kernels SDPA flash and cuDNN launch at the head dims of
# examples/grids/h200-headdims3.yaml (research/scripts/sdpa_workload_calls.py, SDPA_WORKLOAD_SET=headdims3): their
# names, launch shapes, registers and shared memory; OUT/headdims3_calls.json.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5h.sh OUT
W=/tmp/session5h
source research/scripts/gpu_session_common.sh
step 240 env SDPA_WORKLOAD_SET=headdims3 python3 research/scripts/sdpa_workload_calls.py "$out/headdims3_calls.json"
cp "$W/device.txt" "$out/device.txt"
ls -la "$out"
