#!/usr/bin/env bash
# Where PyTorch's flash kernels wait: Nsight Compute's warp-state, occupancy, scheduler and memory sections for the
# problems the model gets most wrong (README Known gaps): the causal launch at N = 1000 beside N = 1024 (B=32,
# H=16, d=64) and the split-KV launches with their combine kernel (B=1, N=512, d=128 H=16 and d=64 H=8). Each
# problem runs twice; the second call's kernels are profiled. Counters only; clocks are left alone.
#   research/scripts/ncu_sdpa_stalls.sh OUT      -> OUT/ncu_stalls_<tag>.csv (--page details --csv), OUT/ncu_stalls_command.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-out}
mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
sections="--section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
--section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section ComputeWorkloadAnalysis"
for spec in "32:16:1000:64:True:ragged_causal" "32:16:1024:64:True:even_causal" "32:16:1000:64:False:ragged_noncausal" \
            "1:16:512:128:False:splitkv_d128" "1:8:512:64:False:splitkv_d64"; do
  IFS=: read -r B H N d causal tag <<< "$spec"
  # the first call's kernels are skipped: one flash kernel, or a split-KV kernel and its combine
  skip=1; [ "${tag#splitkv}" != "$tag" ] && skip=2
  echo "$NCU --clock-control none --kernel-name regex:flash_fwd --launch-skip $skip $sections -o /tmp/stalls_$tag \
python3 research/scripts/sdpa_once.py FLASH_ATTENTION $B $H $N $d $causal" >> "$OUT/ncu_stalls_command.txt"
  "$NCU" --clock-control none --kernel-name regex:flash_fwd --launch-skip $skip $sections -f -o "/tmp/stalls_$tag" \
    python3 research/scripts/sdpa_once.py FLASH_ATTENTION "$B" "$H" "$N" "$d" "$causal" > "$OUT/ncu_stalls_$tag.log" 2>&1 || true
  "$NCU" -i "/tmp/stalls_$tag.ncu-rep" --page details --csv > "$OUT/ncu_stalls_$tag.csv" 2>&1 || true
done
# fa2_tc (this project's kernel) over research/data/grids/ncu-stalls-fa2_tc.yaml, built first outside the profiler; every
# launch of the checked run is profiled (the correctness check's own launch included), one CSV for all
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PERFMODEL_BUILD_DIR=${PERFMODEL_BUILD_DIR:-/tmp/perfmodel-build}
python3 -c "from perfmodel.measure import build; build.load()"
grid=research/data/grids/ncu-stalls-fa2_tc.yaml
python3 -m perfmodel.measure.one --kernel fa2_tc --list $grid > "$OUT/ncu_stalls_fa2_tc.configs"
echo "$NCU --clock-control none --kernel-name regex:fa2_tc_kernel $sections -o /tmp/stalls_fa2_tc \
python3 -m perfmodel.measure.one --kernel fa2_tc --run-grid $grid" >> "$OUT/ncu_stalls_command.txt"
"$NCU" --clock-control none --kernel-name regex:fa2_tc_kernel $sections -f -o /tmp/stalls_fa2_tc \
  python3 -m perfmodel.measure.one --kernel fa2_tc --run-grid $grid > "$OUT/ncu_stalls_fa2_tc.log" 2>&1 || true
"$NCU" -i /tmp/stalls_fa2_tc.ncu-rep --page details --csv > "$OUT/ncu_stalls_fa2_tc.csv" 2>&1 || true
{ "$NCU" --version | tail -1; nvidia-smi --query-gpu=name,clocks.sm,driver_version --format=csv,noheader;
  python3 -c "import torch; print('torch', torch.__version__)"; date -u +%FT%TZ; } >> "$OUT/ncu_stalls_command.txt"
