#!/usr/bin/env bash
# Nsight Compute's counters (research/scripts/ncu_bwd.sh's set) for one SDPA launch, the first kernel whose name
# matches REGEX in one checked call of a configuration:
#   research/scripts/ncu_sdpa_launch.sh OUT TAG REGEX KERNEL NAME=VALUE...
#   -> OUT/ncu_TAG.csv (the raw export) and OUT/ncu_TAG.command.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$1 TAG=$2 REGEX=$3 KERNEL=$4
shift 4
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
METRICS=$(sed -n '/^CORE=/,/launch__grid_size$/p' research/scripts/ncu_bwd.sh | sed 's/^CORE=//' | tr -d '\\\n')
echo "$NCU --clock-control none --cache-control all --kernel-name regex:$REGEX --launch-count 1 --metrics $METRICS" \
     "python3 -m perfmodel.measure.one --kernel $KERNEL $*" > "$OUT/ncu_$TAG.command.txt"
"$NCU" --clock-control none --cache-control all --kernel-name "regex:$REGEX" --launch-count 1 --metrics "$METRICS" \
    -f -o "/tmp/ncu_$TAG" python3 -m perfmodel.measure.one --kernel "$KERNEL" "$@" 2>&1 | tail -2
"$NCU" --import "/tmp/ncu_$TAG.ncu-rep" --csv --page raw --print-units base > "$OUT/ncu_$TAG.csv"
