#!/usr/bin/env bash
# The H200's inference and training datasets: decode, grouped-head prefill, cross-attention and head dimensions
# (forward), and the backward and forward plus backward, for fa2_tc, SDPA flash and cuDNN. Each step's rows are
# appended as they are measured (a rerun resumes); each kernel's CSV lands in OUT (default: out/).
# Run from the repository root on the GPU: bash examples/measure_h200_workloads.sh [OUT]
set -uo pipefail
out=${1:-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} PYTHONPATH=${PYTHONPATH:-.}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$out/device.txt"
python3 -c "from perfmodel.measure import build; build.load()" || exit 1
m() {   # kernel grid csv seconds
    timeout $(($4 + 60)) python3 -m perfmodel measure --kernel "$1" --grid "examples/grids/$2.yaml" \
        --out "$out/$3.csv" --target-s 0.03 --runs 10 --max-seconds "$4" 2>&1 | tail -3
}
for k in sdpa-flash sdpa-cudnn fa2_tc; do
    m $k h200-decode $k-infer ${INFER_S:-45}
    m $k h200-prefill $k-infer ${PREFILL_S:-15}
done
m sdpa-flash h200-headdims sdpa-flash-infer 10
m sdpa-cudnn h200-headdims sdpa-cudnn-infer 10
m sdpa-flash h200-headdims2 sdpa-flash-infer 150
m sdpa-cudnn h200-headdims2 sdpa-cudnn-infer 150
m sdpa-flash h200-bwd-sdpa sdpa-flash-bwd ${BWD_S:-50}
m sdpa-cudnn h200-bwd-sdpa sdpa-cudnn-bwd ${BWD_S:-50}
m fa2_tc h200-bwd-fa2_tc fa2_tc-bwd ${BWD_TC_S:-90}
