#!/usr/bin/env bash
# The fifth GPU session's fifth call (2026-12-02): what cuDNN's d = 256 forward spends a work tile beyond its KV
# steps, where its short launches (N <= 2048) run 13-19% slower than the model. Nsight Compute's per-instruction
# counts and warp samples (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of B 4 H 16 at N 1024 and 2048, not
# causal, beside the N 4096 profile of the first call; packed into OUT/session5e.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5e.sh OUT
W=/tmp/session5e
source research/scripts/gpu_session_common.sh
for N in 1024 2048; do
  step 150 bash research/scripts/ncu_sdpa_launch.sh "$W" "cudnn_n${N}_d256" fprop sdpa-cudnn \
      B=4 H=16 N=$N d=256 dtype=bf16 causal=0
done
(cd "$W" && tar czf "$out/session5e.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
