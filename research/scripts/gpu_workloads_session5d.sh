#!/usr/bin/env bash
# The fifth GPU session's fourth call (2026-12-02): cuDNN's backward at d = 256 (..._bprop_..._64x64x256, never
# profiled), which the model puts 30-39% fast. Nsight Compute's per-instruction counts and warp samples
# (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of that launch (B 2 H 16 N 2048, not causal), and of d 128 at the
# same shape beside it; packed into OUT/session5d.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5d.sh OUT
W=/tmp/session5d
source research/scripts/gpu_session_common.sh
for d in 256 128; do
  step 200 bash research/scripts/ncu_sdpa_launch.sh "$W" "cudnn_bwd_n2048_d$d" bprop sdpa-cudnn \
      B=2 H=16 N=2048 d=$d dtype=bf16 causal=0 mode=bwd
done
(cd "$W" && tar czf "$out/session5d.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
