#!/usr/bin/env bash
# Nsight Compute on one SDPA launch, the first kernel whose name matches REGEX in one checked call of a
# configuration (perfmodel.measure.one):
#   research/scripts/ncu_sdpa_launch.sh OUT TAG REGEX KERNEL NAME=VALUE...
#   -> OUT/ncu_TAG.csv (the raw export of research/scripts/ncu_bwd.sh's counters) and OUT/ncu_TAG.command.txt
#   NCU_SASS=1: instead its SASS with per-instruction execution counts and warp-stall samples (SourceCounters,
#   WarpStateStats, InstructionStats): OUT/sass_TAG.csv and OUT/details_TAG.csv
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$1 TAG=$2 REGEX=$3 KERNEL=$4
shift 4
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
if [ "${NCU_SASS:-0}" = 1 ]; then
  WHAT="--section SourceCounters --section WarpStateStats --section InstructionStats --section LaunchStats \
--section SpeedOfLight --warp-sampling-interval 2"
else
  WHAT="--metrics $(sed -n '/^CORE=/,/launch__grid_size$/p' research/scripts/ncu_bwd.sh | sed 's/^CORE=//' | tr -d '\\\n')"
fi
echo "$NCU --clock-control none --cache-control all --kernel-name regex:$REGEX --launch-count 1 $WHAT" \
     "python3 -m perfmodel.measure.one --kernel $KERNEL $*" > "$OUT/ncu_$TAG.command.txt"
"$NCU" --clock-control none --cache-control all --kernel-name "regex:$REGEX" --launch-count 1 $WHAT \
    -f -o "/tmp/ncu_$TAG" python3 -m perfmodel.measure.one --kernel "$KERNEL" "$@" 2>&1 | tail -2
if [ "${NCU_SASS:-0}" = 1 ]; then
  "$NCU" -i "/tmp/ncu_$TAG.ncu-rep" --page source --print-source sass --csv > "$OUT/sass_$TAG.csv"
  "$NCU" -i "/tmp/ncu_$TAG.ncu-rep" --page details --csv > "$OUT/details_$TAG.csv"
else
  "$NCU" --import "/tmp/ncu_$TAG.ncu-rep" --csv --page raw --print-units base > "$OUT/ncu_$TAG.csv"
fi
