#!/usr/bin/env bash
# The second GPU session's diagnosis (2026-11-28), each step under its own time limit, its files packed into
# OUT/session2.tgz (a lent machine returns at most 8 files):
#   1. ncu_bwd_fa2_tc_code.csv: every fa2_tc backward instance's executed instructions at two lengths and causal;
#   2. ncu_cudnn_bwd*.csv, ncu_cudnn_fwd_*.csv: cuDNN's backward kernel, and its forward with and without the
#      materialised bottom-right mask (research/scripts/ncu_sdpa_launch.sh);
#   3. refusal.log: where the fa2_tc inference binding's refusals end the process (faulthandler, gdb if present).
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session2.sh OUT
set -uo pipefail
out=$(realpath -m "${1:-out}")
w=/tmp/session2
mkdir -p "$out" "$w"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$w/device.txt"
date -u +%FT%TZ >> "$w/device.txt"
step() { local s=$1; shift; echo "== $* ($(date -u +%T))"; timeout "$s" "$@" || echo "== exit $? from $*"; }
step 300 python3 -c "from perfmodel.measure import build; build.load()"
step 200 bash research/scripts/ncu_bwd.sh "$w" research/data/grids/ncu-bwd-fa2_tc-code.yaml code
L=research/scripts/ncu_sdpa_launch.sh
step 60 bash $L "$w" cudnn_bwd_d128 bprop sdpa-cudnn B=1 H=16 N=4096 d=128 dtype=bf16 causal=0 mode=bwd
step 60 bash $L "$w" cudnn_bwd_d64 bprop sdpa-cudnn B=1 H=16 N=4096 d=64 dtype=bf16 causal=0 mode=bwd
step 60 bash $L "$w" cudnn_fwd_plain fprop sdpa-cudnn B=2 H=16 Nq=512 Nk=4096 d=128 dtype=bf16 causal=0
step 60 bash $L "$w" cudnn_fwd_masked fprop sdpa-cudnn B=2 H=16 Nq=512 Nk=4096 d=128 dtype=bf16 causal=1
code="import sys; sys.path.insert(0, 'tests/gpu'); import fa2_tc_infer_check as c; print(c.check_errors(c.load()))"
{ timeout 120 python3 -X faulthandler -c "$code"; echo "exit $?";
  if command -v gdb >/dev/null; then timeout 120 gdb -batch -ex run -ex bt --args python3 -c "$code"; fi; } \
    > "$w/refusal.log" 2>&1
tail -5 "$w/refusal.log"
(cd "$w" && tar czf "$out/session2.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
