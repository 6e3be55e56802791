#!/usr/bin/env bash
# The sixth GPU session's third call (2026-12-02): SDPA flash's causal cross-attention with more queries than keys
# (bottom-right: the first Nq - Nk rows see no key; the model 31-43% fast on those four rows). Nsight Compute's
# counters (NCU_SASS=0) and per-instruction counts with warp samples (NCU_SASS=1) of B 2 H 16 Nq 16384 Nk 512 at
# d 64 and 128; packed into OUT/session6c.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session6c.sh OUT
W=/tmp/session6c
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
for d in 64 128; do
  for sass in 0 1; do
    step 120 env NCU_SASS=$sass bash $L "$W" flash_empty_d$d flash_fwd_kernel sdpa-flash B=2 H=16 Nq=16384 Nk=512 d=$d dtype=bf16 causal=1
  done
done
(cd "$W" && tar czf "$out/session6c.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
