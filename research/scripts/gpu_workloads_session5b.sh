#!/usr/bin/env bash
# The fifth GPU session's second call (2026-12-02): where SDPA flash's d = 80 instance (FlashAttention-2's 96 kernel
# with Is_even_K false) spends the 14% more instructions the first call counted in its split-KV decode. Nsight
# Compute's per-instruction counts and warp samples (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of that
# decode at d 80 and 96 (B 8 H 32 Hkv 8 Nk 32768), and its counters (NCU_SASS=0) of the causal prefill at both
# (B 2 H 16 N 2048); packed into OUT/session5b.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5b.sh OUT
W=/tmp/session5b
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
for d in 80 96; do
  step 150 bash $L "$W" flash_dec_d$d flash_fwd_splitkv_kernel sdpa-flash \
      B=8 H=32 Hkv=8 Nq=1 Nk=32768 d=$d dtype=bf16 causal=0
  step 120 env NCU_SASS=0 bash $L "$W" flash_n2048_d$d flash_fwd_kernel sdpa-flash \
      B=2 H=16 N=2048 d=$d dtype=bf16 causal=1
done
(cd "$W" && tar czf "$out/session5b.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
