#!/usr/bin/env bash
# One GPU session's diagnosis of the inference and training workloads on the H200, each step under its own time
# limit, its files under OUT (default out/):
#   1. sdpa_workload_calls.json: what SDPA flash's and cuDNN's decode, cross, head-dim and backward calls launch;
#   2. probe_atomics.json: fp32 reductions into L2 (perfmodel probe's step 5c);
#   3. ncu_bwd_fa2_tc.csv: Nsight Compute's counters of fa2_tc's backward launches (research/scripts/ncu_bwd.sh);
#   4. K-b32.csv: decode at batch 32 for the three kernels (examples/grids/h200-decode-b32.yaml).
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session.sh OUT
set -uo pipefail
out=${1:-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} PYTHONPATH=$PWD:$PWD/research/scripts
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$out/device.txt"
date -u +%FT%TZ >> "$out/device.txt"
step() { local s=$1; shift; echo "== $* ($(date -u +%T))"; timeout "$s" "$@" || echo "== exit $? from $*"; }
step 200 python3 research/scripts/sdpa_workload_calls.py "$out/sdpa_workload_calls.json" > "$out/calls.log" 2>&1
tail -3 "$out/calls.log"
step 300 python3 -c "
from perfmodel.measure import build
build.load(); build.load_probe()"
step 40 python3 research/scripts/probe_atomics.py "$out/probe_atomics.json"
step 150 bash research/scripts/ncu_bwd.sh "$out"
for k in fa2_tc sdpa-flash sdpa-cudnn; do
    step 60 python3 -m perfmodel measure --kernel $k --grid examples/grids/h200-decode-b32.yaml --out "$out/$k-b32.csv" \
        --target-s 0.03 --runs 10 --max-seconds 30 2>&1 | tail -2
done
