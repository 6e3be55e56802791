#!/usr/bin/env bash
# The SASS of the kernels PyTorch's SDPA backends run (cuDNN's are generated at run time, so no file holds them),
# with Nsight Compute's per-instruction execution counts and warp-stall samples, one problem each: what the presets
# in perfmodel/kernels/sdpa.py assume about their loop nest, and how large their hot loops are, read off the
# instructions. Counters only; clocks are left alone (--clock-control none).
#   research/scripts/ncu_sdpa_sass.sh OUT [SPEC ...]     SPEC: BACKEND:KERNEL_REGEX:B:H:N:d:CAUSAL:TAG
# Default SPECs: cuDNN d 128 and d 64 and flash d 64, B=1 H=16 N=4096 fp16 non-causal (OUT/sdpa_sass.tar.gz).
# The step ncu-flash-sass passes flash's causal launches at N = 1000 (ragged) and 1024 (even), d 64 and 128.
# NCU_CACHE=none: profile with the caches as the call left them (--cache-control none; ncu's default flushes them
# before every pass), for a kernel that reads what the one before it wrote (split-KV's combine).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-out}
shift || true
mkdir -p "$OUT"
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=("CUDNN_ATTENTION:cudnn:1:16:4096:128:0:cudnn_d128" \
  "CUDNN_ATTENTION:cudnn:1:16:4096:64:0:cudnn_d64" "FLASH_ATTENTION:flash_fwd_kernel:1:16:4096:64:0:flash_d64")
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
sections="--section SourceCounters --section LaunchStats --section SpeedOfLight --section InstructionStats ${NCU_SECTIONS:-}"
cache="--cache-control ${NCU_CACHE:-all}"
tags=()
for spec in "${specs[@]}"; do
  IFS=: read -r backend regex B H N d causal tag <<< "$spec"
  tags+=("$tag")
  # the first call's kernel is skipped: the second call's is profiled
  echo "${SDPA_DTYPE:+SDPA_DTYPE=$SDPA_DTYPE }$NCU --clock-control none $cache --kernel-name regex:$regex --launch-skip 1 --launch-count 1 $sections -o /tmp/$tag \
python3 research/scripts/sdpa_once.py $backend $B $H $N $d $causal" >> "$OUT/ncu_sass_command.txt"
  "$NCU" --clock-control none $cache --kernel-name "regex:$regex" --launch-skip 1 --launch-count 1 $sections -f -o "/tmp/$tag" \
    python3 research/scripts/sdpa_once.py "$backend" "$B" "$H" "$N" "$d" "$causal" > "$OUT/ncu_$tag.log" 2>&1 || true
  "$NCU" -i "/tmp/$tag.ncu-rep" --page source --print-source sass --csv > "/tmp/sass_$tag.csv" 2>&1 || true
  "$NCU" -i "/tmp/$tag.ncu-rep" --page details --csv > "/tmp/details_$tag.csv" 2>&1 || true
done
{ "$NCU" --version | tail -1; nvidia-smi --query-gpu=name,clocks.sm,driver_version --format=csv,noheader;
  python3 -c "import torch; print('torch', torch.__version__)"; date -u +%FT%TZ; } >> "$OUT/ncu_sass_command.txt"
tar -C /tmp -czf "$OUT/sdpa_sass.tar.gz" $(for t in "${tags[@]}"; do echo "sass_$t.csv details_$t.csv"; done)
