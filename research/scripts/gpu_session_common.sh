# Sourced by the research/scripts/gpu_workloads_session*.sh calls after setting W (their scratch folder): the output
# folder from $1, the environment, the device's provenance into $W/device.txt, step(), which runs one command
# under a time limit and goes on past a failure, and measure_sdpa(), which times both SDPA presets over a grid.
set -uo pipefail
out=$(realpath -m "${1:-out}")
mkdir -p "$out" "$W"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD NCU_SASS=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$W/device.txt"
date -u +%FT%TZ >> "$W/device.txt"
step() { local s=$1; shift; echo "== $* ($(date -u +%T))"; timeout "$s" "$@" || echo "== exit $? from $*"; }
# both SDPA presets timed over a grid (GRID: its examples/grids/ name) into DIR/KERNEL-GRID_SUFFIX.csv
measure_sdpa() {
  local grid=$1 dir=$2 tag=$3 k
  for k in sdpa-flash sdpa-cudnn; do
    step 200 python3 -m perfmodel measure --kernel $k --grid "examples/grids/$grid.yaml" \
        --out "$dir/$k-$tag.csv" --target-s 0.03 --runs 10 --max-seconds 150
  done
}
