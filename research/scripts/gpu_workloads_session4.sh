#!/usr/bin/env bash
# The fourth GPU session's call (2026-12-02): what cuDNN's one-query decode runs where the model misses it most.
# The launches of every call (research/scripts/sdpa_workload_calls.py, SDPA_WORKLOAD_SET=decode-cudnn: head dims
# 32-256, one K/V head under 64 batches, long caches of many blocks) and Nsight Compute's warp samples
# (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of three of its launches; packed into OUT/session4.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session4.sh OUT
W=/tmp/session4
source research/scripts/gpu_session_common.sh
step 240 env SDPA_WORKLOAD_SET=decode-cudnn python3 research/scripts/sdpa_workload_calls.py "$W/decode_cudnn_calls.json"
L=research/scripts/ncu_sdpa_launch.sh
step 90 bash $L "$W" cudnn_dec1_d256 fprop sdpa-cudnn B=8 H=32 Hkv=8 Nq=1 Nk=8192 d=256 dtype=bf16 causal=0
step 90 bash $L "$W" cudnn_dec1_b64 fprop sdpa-cudnn B=64 H=32 Hkv=1 Nq=1 Nk=8192 d=64 dtype=bf16 causal=0
step 120 bash $L "$W" cudnn_dec1_many fprop sdpa-cudnn B=8 H=32 Hkv=32 Nq=1 Nk=131072 d=64 dtype=bf16 causal=0
(cd "$W" && tar czf "$out/session4.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
