#!/usr/bin/env bash
# The fifth GPU session's call (2026-12-02): the SDPA presets' head dims beyond 64 and 128 where the model misses
# them. The timings of examples/grids/h200-headdims2.yaml (d 32-256 at more batches, caches and prefill lengths)
# for both presets; Nsight Compute's per-instruction counts and warp samples (research/scripts/ncu_sdpa_launch.sh,
# NCU_SASS=1) of cuDNN's forward at d 256 (B 4 H 16 N 4096, beside the d 128 profile of that shape), and its
# memory counters (NCU_SASS=0) of SDPA flash's split-KV decode at d 80 and 96 (B 8 H 32 Hkv 8 Nk 32768), where d 80
# streams slower than d 96; packed into OUT/session5.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5.sh OUT
W=/tmp/session5
source research/scripts/gpu_session_common.sh
measure_sdpa h200-headdims2 "$W" headdims2
L=research/scripts/ncu_sdpa_launch.sh
step 150 bash $L "$W" cudnn_n4096_d256 fprop sdpa-cudnn B=4 H=16 N=4096 d=256 dtype=bf16 causal=0
for d in 80 96; do
  step 120 env NCU_SASS=0 bash $L "$W" flash_dec_d$d flash_fwd_splitkv_kernel sdpa-flash \
      B=8 H=32 Hkv=8 Nq=1 Nk=32768 d=$d dtype=bf16 causal=0
done
(cd "$W" && tar czf "$out/session5.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
