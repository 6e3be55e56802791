#!/usr/bin/env bash
# The fourth GPU session's second call (2026-12-02): Nsight Compute's per-instruction counts and warp samples
# (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of cuDNN's forward at lengths that are and are not multiples of
# its 128-row tiles (N 5000 against 5120, d 64 and 128), and causal at N 4096 (d 128); packed into
# OUT/session4b.tgz. Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session4b.sh OUT
W=/tmp/session4b
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
for d in 128 64; do
  for N in 5000 5120; do
    step 120 bash $L "$W" cudnn_n${N}_d$d fprop sdpa-cudnn B=2 H=16 N=$N d=$d dtype=bf16 causal=0
  done
done
step 120 bash $L "$W" cudnn_n4096_d128_causal fprop sdpa-cudnn B=2 H=16 N=4096 d=128 dtype=bf16 causal=1
step 120 bash $L "$W" cudnn_n4096_d128 fprop sdpa-cudnn B=2 H=16 N=4096 d=128 dtype=bf16 causal=0
(cd "$W" && tar czf "$out/session4b.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
