#!/usr/bin/env bash
# The fifth GPU session's ninth call (2026-12-02): what FlashAttention-2's ragged-head-dim instances (Is_even_K false)
# add at other widths than d 80 on the 96 kernel: Nsight Compute's counters (research/scripts/ncu_sdpa_launch.sh,
# NCU_SASS=0) of SDPA flash's causal forward (B 2 H 16 N 2048) at d 48 and 64 (the 64 kernel), 112 and 128 (the
# 128 kernel), 200 and 256 (the 256 kernel); packed into OUT/session5i.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5i.sh OUT
W=/tmp/session5i
source research/scripts/gpu_session_common.sh
for d in 48 64 112 128 200 256; do
  step 90 env NCU_SASS=0 bash research/scripts/ncu_sdpa_launch.sh "$W" flash_n2048_d$d flash_fwd_kernel sdpa-flash \
      B=2 H=16 N=2048 d=$d dtype=bf16 causal=1
done
(cd "$W" && tar czf "$out/session5i.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
