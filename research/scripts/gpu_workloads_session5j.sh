#!/usr/bin/env bash
# The fifth GPU session's tenth call (2026-12-02): SDPA flash's 192 instance (128 x 64 tiles, 8 warps), which the
# model puts 18% slow at d 160 and 192 prefill. Nsight Compute's counters (NCU_SASS=0) and per-instruction counts and
# warp samples (NCU_SASS=1) of its forward at d 192 (B 2 H 16 N 2048, not causal); packed into OUT/session5j.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5j.sh OUT
W=/tmp/session5j
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
step 100 env NCU_SASS=0 bash $L "$W" flash_n2048_d192 flash_fwd_kernel sdpa-flash B=2 H=16 N=2048 d=192 dtype=bf16 causal=0
step 120 bash $L "$W" flash_n2048_d192 flash_fwd_kernel sdpa-flash B=2 H=16 N=2048 d=192 dtype=bf16 causal=0
(cd "$W" && tar czf "$out/session5j.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
