#!/usr/bin/env bash
# The fourth GPU session's third call (2026-12-02): whether cuDNN's causal forward masks every tile against a
# ragged key count, as its plain forward does: Nsight Compute's per-instruction counts (research/scripts/
# ncu_sdpa_launch.sh, NCU_SASS=1) at N 5000 against 5120, causal, d 64; packed into OUT/session4c.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session4c.sh OUT
W=/tmp/session4c
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
for N in 5000 5120; do
  step 120 bash $L "$W" cudnn_n${N}_d64_causal fprop sdpa-cudnn B=2 H=16 N=$N d=64 dtype=bf16 causal=1
done
(cd "$W" && tar czf "$out/session4c.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
