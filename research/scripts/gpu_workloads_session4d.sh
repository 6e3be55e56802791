#!/usr/bin/env bash
# The fourth GPU session's fourth call (2026-12-02): Nsight Compute's per-instruction counts and warp samples
# (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1) of cuDNN's forward under PyTorch's bottom-right mask against the
# same launch without it at d 64 (B 2 H 16 Nq 512 Nk 4096), beside the d 128 pair of the second session; packed into
# OUT/session4d.tgz. Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session4d.sh OUT
W=/tmp/session4d
source research/scripts/gpu_session_common.sh
L=research/scripts/ncu_sdpa_launch.sh
step 120 bash $L "$W" cudnn_fwd_masked_d64 fprop sdpa-cudnn B=2 H=16 Nq=512 Nk=4096 d=64 dtype=bf16 causal=1
step 120 bash $L "$W" cudnn_fwd_plain_d64 fprop sdpa-cudnn B=2 H=16 Nq=512 Nk=4096 d=64 dtype=bf16 causal=0
(cd "$W" && tar czf "$out/session4d.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
