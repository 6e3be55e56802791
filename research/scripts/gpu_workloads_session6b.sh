#!/usr/bin/env bash
# The sixth GPU session's second call (2026-12-02): where short causal launches of SDPA flash spend their time, for
# the issue-slot join (research/notes/known-gaps-log.md, 2026-12-02 sixth session). Nsight Compute's counters
# (NCU_SASS=0) and per-instruction counts with warp-stall samples (NCU_SASS=1) of SDPA flash's forward at d 64,
# B 32 H 16 N 512, causal and not, and of fa2_tc at the same shape and tile (128 x 128, 4 warps); packed into
# OUT/session6b.tgz. Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session6b.sh OUT
W=/tmp/session6b
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
for c in 1 0; do
  for sass in 0 1; do
    step 120 env NCU_SASS=$sass bash $L "$W" flash_n512_c$c flash_fwd_kernel sdpa-flash B=32 H=16 N=512 d=64 dtype=bf16 causal=$c
    step 120 env NCU_SASS=$sass bash $L "$W" tc_n512_c$c "fa2_tc(_ext)?_kernel" fa2_tc B=32 H=16 N=512 d=64 dtype=bf16 causal=$c Br=128 Bc=128 warps=4
  done
done
(cd "$W" && tar czf "$out/session6b.tgz" --exclude='*.ncu-rep' .)
cp "$W/device.txt" "$out/device-6b.txt"
ls -la "$out"
