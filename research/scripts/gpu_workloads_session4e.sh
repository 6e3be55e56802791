#!/usr/bin/env bash
# The fourth GPU session's fifth call (2026-12-02): Nsight Compute's per-instruction counts, warp samples and launch
# statistics (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of SDPA flash's forward at d 32 and d 64 (B 4 H 16
# N 4096), where the preset runs 18% slow at d 32; packed into OUT/session4e.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session4e.sh OUT
W=/tmp/session4e
source research/scripts/gpu_session_common.sh
for d in 32 64; do
  step 120 bash research/scripts/ncu_sdpa_launch.sh "$W" "flash_n4096_d$d" flash_fwd sdpa-flash \
    B=4 H=16 N=4096 d="$d" dtype=bf16 causal=0
done
(cd "$W" && tar czf "$out/session4e.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
