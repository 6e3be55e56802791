#!/usr/bin/env bash
# Nsight Compute counters for a fixed set of configurations of each kernel, one ncu report per configuration,
# exported to one CSV per kernel under $1 (default ./out).
#   scripts/ncu_run.sh OUT [KERNEL:GRID ...]     default: fa1:examples/grids/ncu.yaml fa2:examples/grids/ncu.yaml
# Clocks are left alone (--clock-control none); caches are flushed before each pass (--cache-control all).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out}
shift || true
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(fa1:examples/grids/ncu.yaml fa2:examples/grids/ncu.yaml)
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PERFMODEL_BUILD_DIR=${PERFMODEL_BUILD_DIR:-/tmp/perfmodel-build}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,\
lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,\
smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,\
smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,smsp__inst_executed.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,launch__occupancy_limit_shared_mem,launch__waves_per_multiprocessor,\
smsp__inst_executed_pipe_tensor_op_hmma.sum,smsp__sass_inst_executed_op_ldsm.sum,\
smsp__sass_inst_executed_op_ldgsts.sum,smsp__inst_executed_pipe_xu.sum
echo "$NCU --clock-control none --cache-control all --kernel-name regex:KERNEL_kernel --launch-count 1 --metrics $METRICS" > "$OUT/ncu_command.txt"
for spec in "${specs[@]}"; do
  k=${spec%%:*}; grid=${spec#*:}
  python3 -m perfmodel.measure.one --kernel $k --list "$grid" > "$OUT/ncu_$k.configs"
  first=1
  while read -r args; do
    rep="/tmp/ncu_${k}_$(echo "$args" | tr ' =' '__')"
    "$NCU" --clock-control none --cache-control all --kernel-name "regex:${k}_kernel" --launch-count 1 \
      --metrics "$METRICS" -f -o "$rep" python3 -m perfmodel.measure.one --kernel $k $args > "$rep.log" 2>&1 || { echo "ncu failed: $k $args"; tail -3 "$rep.log"; continue; }
    "$NCU" --import "$rep.ncu-rep" --csv --page raw --print-units base > "$rep.csv"
    # one header (+ units) per kernel file, then one row per configuration, with the configuration in front
    python3 - "$rep.csv" "$OUT/ncu_$k.csv" "$args" "$first" <<'PY'
import csv, sys
src, dst, args, first = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
lines = [l for l in open(src) if l.startswith('"')]
rows = list(csv.reader(lines))
header, data = rows[0], rows[2:]
cfg = dict(kv.split("=") for kv in args.split())
keep = [i for i, h in enumerate(header) if "__" in h or h in ("Kernel Name", "Block Size", "Grid Size")]
with open(dst, "a", newline="") as f:
    w = csv.writer(f)
    if first:
        w.writerow(list(cfg) + [header[i] for i in keep])
    for r in data[:1]:
        w.writerow(list(cfg.values()) + [r[i].replace(",", "") for i in keep])
PY
    first=0
  done < "$OUT/ncu_$k.configs"
done
ls -la "$OUT"/ncu_*
