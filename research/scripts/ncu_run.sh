#!/usr/bin/env bash
# Nsight Compute counters for a fixed set of configurations of each kernel, exported to one CSV per kernel under
# $1 (default ./out).
#   research/scripts/ncu_run.sh OUT [KERNEL:GRID ...]     default: fa1:research/data/grids/ncu-fa1.yaml fa2:research/data/grids/ncu.yaml
# Clocks are left alone (--clock-control none); caches are flushed before each pass (--cache-control all).
#   NCU_METRICS=dram   only the time, DRAM and L2 counters (few passes: fast); files are named ncu_dram_*
#   NCU_ONE_PROCESS=1  one ncu run per kernel over one python process that launches every configuration of the
#                      grid once (perfmodel.measure.one --run-grid), instead of one process per configuration;
#                      the exported rows are matched to the configurations in order, and each row's grid size is
#                      checked against the configuration's
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-out}
shift || true
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(fa1:research/data/grids/ncu-fa1.yaml fa2:research/data/grids/ncu.yaml)
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PERFMODEL_BUILD_DIR=${PERFMODEL_BUILD_DIR:-/tmp/perfmodel-build}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
EXTRA=""
if [ "${NCU_METRICS:-all}" = dram ]; then
  prefix=ncu_dram
  METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sector_hit_rate.pct,\
launch__registers_per_thread,launch__waves_per_multiprocessor,launch__occupancy_limit_shared_mem
  # L2 detail that helps tell the mechanisms apart (far-partition traffic, read and write lookup hits); dropped
  # if this ncu does not know them
  EXTRA=lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,\
lts__t_sectors_srcunit_tex_op_write_lookup_hit.sum
else
  prefix=ncu
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
fi
ALL=$METRICS${EXTRA:+,$EXTRA}
if [ "${NCU_ONE_PROCESS:-0}" = 1 ]; then
  echo "$NCU --clock-control none --cache-control all --kernel-name regex:KERNEL_kernel --metrics $ALL" \
       "python3 -m perfmodel.measure.one --kernel KERNEL --run-grid GRID" > "$OUT/${prefix}_command.txt"
else
  echo "$NCU --clock-control none --cache-control all --kernel-name regex:KERNEL_kernel --launch-count 1 --metrics $ALL" \
       > "$OUT/${prefix}_command.txt"
fi

"$NCU" --version | tail -1 >> "$OUT/${prefix}_command.txt" || true

# append the exported rows of one report to a kernel's CSV, each with its configuration in front
merge() {  # report.csv dst.csv first(1|0) configuration lines...
  python3 - "$@" <<'PY'
import csv, re, sys
src, dst, first, configs = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
lines = [l for l in open(src) if l.startswith('"')]
rows = list(csv.reader(lines))
header, data = rows[0], rows[2:]
if len(data) != len(configs):
    print(f"ncu_run: {len(data)} profiled launches for {len(configs)} configurations in {src}", file=sys.stderr)
keep = [i for i, h in enumerate(header) if "__" in h or h in ("Kernel Name", "Block Size", "Grid Size")]
gs = header.index("Grid Size") if "Grid Size" in header else None
from perfmodel.kernels import get
from perfmodel.measure.one import configure
with open(dst, "a", newline="") as f:
    w = csv.writer(f)
    for n, (args, r) in enumerate(zip(configs, data)):
        cfg = dict(kv.split("=") for kv in args.split())
        if gs is not None:        # the launch must be this configuration's: same number of blocks
            p = dict(cfg)
            k = get(p.pop("kernel"))
            want = int(k.grid_blocks(*configure(k, p)))
            got = 1
            for x in re.findall(r"\d+", r[gs]):
                got *= int(x)
            if got != want:
                sys.exit(f"ncu_run: launch {n} has {got} blocks, configuration {args} has {want}: rows out of line")
        cfg.pop("kernel")
        if first and n == 0:
            w.writerow(list(cfg) + [header[i] for i in keep])
        w.writerow(list(cfg.values()) + [r[i].replace(",", "") for i in keep])
PY
}

# build the kernels first, outside the profiler (ncu follows child processes: nvcc would run under it)
python3 -c "from perfmodel.measure import build; build.load()"
for spec in "${specs[@]}"; do
  k=${spec%%:*}; grid=${spec#*:}
  python3 -m perfmodel.measure.one --kernel $k --list "$grid" > "$OUT/${prefix}_$k.configs"
  mapfile -t cfgs < "$OUT/${prefix}_$k.configs"
  tagged=("${cfgs[@]/#/kernel=$k }")
  if [ "${NCU_ONE_PROCESS:-0}" = 1 ]; then
    rep="/tmp/${prefix}_${k}_all"
    echo "ncu_run: $k, ${#cfgs[@]} configurations, $(date -u +%H:%M:%S)"
    rm -f "$rep.ncu-rep"
    status=0
    "$NCU" --clock-control none --cache-control all --kernel-name "regex:${k}_kernel" --metrics "$ALL" -f -o "$rep" \
      python3 -m perfmodel.measure.one --kernel $k --run-grid "$grid" 2>&1 | tee "$rep.log" || status=$?
    if [ ! -f "$rep.ncu-rep" ] && [ -n "$EXTRA" ]; then
      echo "ncu_run: no report with the extra L2 metrics; again without them"
      sed -i "s#,$EXTRA##" "$OUT/${prefix}_command.txt"
      ALL=$METRICS EXTRA=""
      "$NCU" --clock-control none --cache-control all --kernel-name "regex:${k}_kernel" --metrics "$ALL" -f -o "$rep" \
        python3 -m perfmodel.measure.one --kernel $k --run-grid "$grid" 2>&1 | tee "$rep.log" || status=$?
    fi
    [ -f "$rep.ncu-rep" ] || { echo "ncu failed: $k $grid"; continue; }
    [ $status = 0 ] || echo "ncu_run: $k stopped early (status $status); the rows before the failure are kept"
    "$NCU" --import "$rep.ncu-rep" --csv --page raw --print-units base > "$rep.csv"
    merge "$rep.csv" "$OUT/${prefix}_$k.csv" 1 "${tagged[@]}" \
      || { echo "ncu_run: $k rows not merged; the export is kept as ${prefix}_${k}_raw.csv"; cp "$rep.csv" "$OUT/${prefix}_${k}_raw.csv"; }
  else
    first=1
    for args in "${cfgs[@]}"; do
      rep="/tmp/${prefix}_${k}_$(echo "$args" | tr ' =' '__')"
      "$NCU" --clock-control none --cache-control all --kernel-name "regex:${k}_kernel" --launch-count 1 \
        --metrics "$ALL" -f -o "$rep" python3 -m perfmodel.measure.one --kernel $k $args > "$rep.log" 2>&1 \
        || { echo "ncu failed: $k $args"; tail -3 "$rep.log"; continue; }
      "$NCU" --import "$rep.ncu-rep" --csv --page raw --print-units base > "$rep.csv"
      merge "$rep.csv" "$OUT/${prefix}_$k.csv" $first "kernel=$k $args"
      first=0
    done
  fi
done
ls -la "$OUT"/${prefix}_*
