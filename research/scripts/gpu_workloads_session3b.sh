#!/usr/bin/env bash
# The third GPU session's second call (2026-12-01): Nsight Compute's warp samples (research/scripts/
# ncu_sdpa_launch.sh, NCU_SASS=1) of cuDNN's one-query decode kernel on a short and a long cache, and of its prefill
# kernel on 32 queries with every SM busy (B 8) beside the B 1 launch of the first call; packed into
# OUT/session3b.tgz. Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session3b.sh OUT
W=/tmp/session3b
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
step 90 bash $L "$W" cudnn_dec1_short fprop sdpa-cudnn B=1 H=32 Hkv=8 Nq=1 Nk=1024 d=128 dtype=bf16 causal=0
step 90 bash $L "$W" cudnn_dec1_long fprop sdpa-cudnn B=1 H=32 Hkv=8 Nq=1 Nk=32768 d=128 dtype=bf16 causal=0
step 120 bash $L "$W" cudnn_dec_q32_b8 fprop sdpa-cudnn B=8 H=32 Hkv=8 Nq=32 Nk=32768 d=128 dtype=bf16 causal=0
(cd "$W" && tar czf "$out/session3b.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
