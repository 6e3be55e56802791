#!/usr/bin/env bash
# The third GPU session's diagnosis (2026-12-01), each step under its own time limit, its files packed into
# OUT/session3.tgz (a lent machine returns at most 8 files):
#   1. decode_calls.json: fa2_tc's split kernel and combine apart, 1 to 128 splits (research/scripts/decode_calls.py);
#   2. combine_sass.txt: the combine kernel's SASS at every head dim (cuobjdump of the built module);
#   3. sass_cudnn_dec_*.csv, details_cudnn_dec_*.csv: cuDNN's prefill kernel on 32 queries against a long cache
#      (research/scripts/ncu_sdpa_launch.sh, NCU_SASS=1): its clock, cycles and warp samples a KV step.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session3.sh OUT
set -uo pipefail
out=$(realpath -m "${1:-out}")
w=/tmp/session3
mkdir -p "$out" "$w"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} PYTHONPATH=$PWD:$PWD/research/scripts
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$w/device.txt"
date -u +%FT%TZ >> "$w/device.txt"
step() { local s=$1; shift; echo "== $* ($(date -u +%T))"; timeout "$s" "$@" || echo "== exit $? from $*"; }
step 300 python3 -c "from perfmodel.measure import build; print(build.load().__file__)" | tee "$w/module.txt"
step 150 python3 research/scripts/decode_calls.py "$w/decode_calls.json"
so=$(tail -1 "$w/module.txt")
if [ -f "$so" ]; then
  cuobjdump -sass "$so" | awk '/Function : /{keep = ($0 ~ /combine/)} keep' > "$w/combine_sass.txt"
  wc -l "$w/combine_sass.txt"
fi
L=research/scripts/ncu_sdpa_launch.sh
export NCU_SASS=1
step 70 bash $L "$w" cudnn_dec_q32_d128 fprop sdpa-cudnn B=1 H=32 Hkv=8 Nq=32 Nk=32768 d=128 dtype=bf16 causal=0
step 70 bash $L "$w" cudnn_dec_q32_d64 fprop sdpa-cudnn B=1 H=32 Hkv=8 Nq=32 Nk=32768 d=64 dtype=bf16 causal=0
(cd "$w" && tar czf "$out/session3.tgz" --exclude='*.ncu-rep' .)
ls -la "$out"
