#!/usr/bin/env bash
# The fourth GPU session's call (2026-12-02): what cuDNN's one-query decode runs where the model misses it most.
# The launches of every call (research/scripts/sdpa_workload_calls.py, SDPA_WORKLOAD_SET=decode-cudnn: head dims
# 32-256, one K/V head under 64 batches, long caches of many blocks) and Nsight Compute's warp samples
# (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of three of its launches; packed into OUT/session4.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session4.sh OUT
W=/tmp/session4
source research/scripts/gpu_session_common.sh
step 240 env SDPA_WORKLOAD_SET=decode-cudnn python3 research/scripts/sdpa_workload_calls.py "$W/decode_cudnn_calls.json"
# one-query launches profiled: tag, then B Hkv Nk d (H 32)
while read -r tag B Hkv Nk d; do
  step 120 bash research/scripts/ncu_sdpa_launch.sh "$W" "cudnn_dec1_$tag" fprop sdpa-cudnn \
    B="$B" H=32 Hkv="$Hkv" Nq=1 Nk="$Nk" d="$d" dtype=bf16 causal=0
done <<'LAUNCHES'
d256 8 8 8192 256
b64 64 1 8192 64
many 8 32 131072 64
LAUNCHES
(cd "$W" && tar czf "$out/session4.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
