#!/usr/bin/env bash
# The fifth GPU session's sixth call (2026-12-02): cuDNN's one-query decode at one batch, which the model puts 11%
# fast on average (44 rows). Nsight Compute's per-instruction counts and warp samples (research/scripts/
# ncu_sdpa_launch.sh, NCU_SASS=1) of B 1 H 32 d 128 at 8k keys over 8 and 1 K/V heads (256 blocks of two key tiles,
# 128 of one), beside the 1k-key profile of session 4 (64 blocks of one tile); packed into OUT/session5f.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5f.sh OUT
W=/tmp/session5f
source research/scripts/gpu_session_common.sh
for Hkv in 8 1; do
  step 150 bash research/scripts/ncu_sdpa_launch.sh "$W" "cudnn_dec1_b1_hkv$Hkv" fprop sdpa-cudnn \
      B=1 H=32 Hkv=$Hkv Nq=1 Nk=8192 d=128 dtype=bf16 causal=0
done
(cd "$W" && tar czf "$out/session5f.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
