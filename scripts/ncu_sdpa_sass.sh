#!/usr/bin/env bash
# The SASS of the kernels PyTorch's SDPA backends run (cuDNN's are generated at run time, so no file holds them),
# with Nsight Compute's per-instruction execution counts, for one problem each: what the presets in
# perfmodel/kernels/sdpa.py assume about their loop nest, read off the instructions. Counters only; clocks are left
# alone (--clock-control none).
#   scripts/ncu_sdpa_sass.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out}
mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
for spec in "CUDNN_ATTENTION:cudnn:128" "CUDNN_ATTENTION:cudnn:64" "FLASH_ATTENTION:flash_fwd_kernel:64"; do
  IFS=: read -r backend regex d <<< "$spec"
  tag=$(echo "$backend" | cut -d_ -f1 | tr A-Z a-z)_d$d
  cmd="import torch; from torch.nn.attention import SDPBackend, sdpa_kernel
q, k, v = (torch.randn(1, 16, 4096, $d, device='cuda', dtype=torch.float16) for _ in range(3))
for _ in range(2):
    with sdpa_kernel([SDPBackend.$backend]):
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()"
  echo "$NCU --clock-control none --kernel-name regex:$regex --launch-skip 1 --launch-count 1 --section SourceCounters --section LaunchStats --section SpeedOfLight --section InstructionStats -o /tmp/$tag python3 -c <B=1 H=16 N=4096 d=$d fp16 non-causal, $backend>" >> "$OUT/ncu_sass_command.txt"
  "$NCU" --clock-control none --kernel-name "regex:$regex" --launch-skip 1 --launch-count 1 --section SourceCounters \
    --section LaunchStats --section SpeedOfLight --section InstructionStats -f -o "/tmp/$tag" python3 -c "$cmd" > "$OUT/ncu_$tag.log" 2>&1 || true
  "$NCU" -i "/tmp/$tag.ncu-rep" --page source --print-source sass --csv > "/tmp/sass_$tag.csv" 2>&1 || true
  "$NCU" -i "/tmp/$tag.ncu-rep" --page details --csv > "/tmp/details_$tag.csv" 2>&1 || true
done
"$NCU" --version | tail -1 >> "$OUT/ncu_sass_command.txt"
tar -C /tmp -czf "$OUT/sdpa_sass.tar.gz" $(cd /tmp && ls sass_*.csv details_*.csv)
