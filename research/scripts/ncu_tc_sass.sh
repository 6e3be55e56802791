#!/usr/bin/env bash
# Where fa2_tc's warps spend a KV tile: Nsight Compute's per-instruction execution counts and warp-stall samples
# (SourceCounters) for single launches, one configuration each. Default: the d = 128 and d = 64 tiles that
# research/data/grids/ncu-stalls-fa2_tc.yaml compares, as lone blocks (B=1 H=1 N=8192: one block per SM, causal and not)
# and at many waves (B=32 H=16 N=2048). Warps are sampled every 2^(5+2) cycles. Counters only; clocks are left
# alone (--clock-control none).
#   research/scripts/ncu_tc_sass.sh OUT [SPEC ...]    SPEC: B:H:N:d:CAUSAL:Br:Bc:WARPS:TAG
#   -> OUT/tc_sass.tar.gz: sass_TAG.csv (--page source --print-source sass), details_TAG.csv, ncu_TAG.log and
#      ncu_sass_command.txt (the commands, ncu's version, GPU, clock, driver, torch, date), one file (a lent machine
#      returns at most 8). research/scripts/tc_stalls.py reduces it to stall cycles per KV tile.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-out}
shift || true
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PERFMODEL_BUILD_DIR=${PERFMODEL_BUILD_DIR:-/tmp/perfmodel-build}
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(
  1:1:8192:128:0:64:64:4:lone_d128_64x64w4 1:1:8192:128:0:128:64:4:lone_d128_128x64w4
  1:1:8192:128:0:128:128:8:lone_d128_128x128w8 1:1:8192:128:1:64:64:4:lone_causal_d128_64x64w4
  1:1:8192:128:1:128:128:8:lone_causal_d128_128x128w8 1:1:8192:64:0:64:64:4:lone_d64_64x64w4
  1:1:8192:64:0:128:128:4:lone_d64_128x128w4 1:1:8192:64:0:128:64:8:lone_d64_128x64w8
  32:16:2048:128:0:64:64:4:full_d128_64x64w4 32:16:2048:128:0:128:128:8:full_d128_128x128w8)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
sections="--section SourceCounters --section LaunchStats --section SpeedOfLight --section WarpStateStats"
python3 -c "from perfmodel.measure import build; build.load()"          # built outside the profiler
tags=()
for spec in "${specs[@]}"; do
  IFS=: read -r B H N d causal Br Bc w tag <<< "$spec"
  tags+=("$tag")
  args="B=$B H=$H N=$N d=$d dtype=fp16 causal=$causal Br=$Br Bc=$Bc warps=$w"
  # the checked launch is the configuration's only one
  echo "$NCU --clock-control none --kernel-name regex:fa2_tc_kernel --launch-count 1 --warp-sampling-interval 2 \
$sections -o /tmp/$tag python3 -m perfmodel.measure.one --kernel fa2_tc $args" >> "$OUT/ncu_sass_command.txt"
  "$NCU" --clock-control none --kernel-name regex:fa2_tc_kernel --launch-count 1 --warp-sampling-interval 2 \
    $sections -f -o "/tmp/$tag" python3 -m perfmodel.measure.one --kernel fa2_tc $args > "/tmp/ncu_$tag.log" 2>&1 || true
  "$NCU" -i "/tmp/$tag.ncu-rep" --page source --print-source sass --csv > "/tmp/sass_$tag.csv" 2>&1 || true
  "$NCU" -i "/tmp/$tag.ncu-rep" --page details --csv > "/tmp/details_$tag.csv" 2>&1 || true
done
{ "$NCU" --version | tail -1; nvidia-smi --query-gpu=name,clocks.sm,driver_version --format=csv,noheader;
  python3 -c "import torch; print('torch', torch.__version__)"; date -u +%FT%TZ; } >> "$OUT/ncu_sass_command.txt"
cp "$OUT/ncu_sass_command.txt" /tmp/ncu_sass_command.txt
tar -C /tmp -czf "$OUT/tc_sass.tar.gz" ncu_sass_command.txt \
  $(for t in "${tags[@]}"; do echo "sass_$t.csv details_$t.csv ncu_$t.log"; done)
