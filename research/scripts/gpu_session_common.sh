# Sourced by the research/scripts/gpu_workloads_session*.sh calls after setting W (their scratch folder): the output
# folder from $1, the environment, the device's provenance into $W/device.txt and step(), which runs one command
# under a time limit and goes on past a failure.
set -uo pipefail
out=$(realpath -m "${1:-out}")
mkdir -p "$out" "$W"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD NCU_SASS=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$W/device.txt"
date -u +%FT%TZ >> "$W/device.txt"
step() { local s=$1; shift; echo "== $* ($(date -u +%T))"; timeout "$s" "$@" || echo "== exit $? from $*"; }
