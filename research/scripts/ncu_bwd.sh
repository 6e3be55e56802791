#!/usr/bin/env bash
# Nsight Compute counters of fa2_tc's backward, its three launches (fa2_tc_bwd_pre, fa2_tc_bwd_kernel,
# fa2_tc_bwd_convert) for every configuration of a grid, in one process (perfmodel.measure.one --run-grid: one
# checked backward a configuration), exported to OUT/ncu_bwd_fa2_tc.csv with each row's configuration in front.
#   research/scripts/ncu_bwd.sh OUT [GRID [TAG]]   default GRID: research/data/grids/ncu-bwd-fa2_tc.yaml; files
#   are named ncu_bwd_fa2_tc*, with _TAG after it where one is given
# Clocks are left alone (--clock-control none); caches are flushed before each pass (--cache-control all).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-out}
GRID=${2:-research/data/grids/ncu-bwd-fa2_tc.yaml}
NAME=ncu_bwd_fa2_tc${3:+_$3}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
# time, DRAM, L2 by operation (the atomics' sectors and requests), instructions by kind, shared memory
CORE=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_red.sum,\
lts__t_requests_srcunit_tex_op_red.sum,smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor_op_hmma.sum,\
smsp__sass_inst_executed_op_ldsm.sum,smsp__sass_inst_executed_op_ldgsts.sum,smsp__inst_executed_pipe_xu.sum,\
smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_inst_executed_op_shared_ld.sum,\
smsp__sass_inst_executed_op_global_red.sum,smsp__sass_inst_executed_op_global_st.sum,\
smsp__sass_inst_executed_op_global_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum,\
launch__registers_per_thread,launch__grid_size
python3 -m perfmodel.measure.one --kernel fa2_tc --list "$GRID" > "$OUT/$NAME.configs"
{ echo "$NCU --clock-control none --cache-control all --kernel-name regex:fa2_tc_bwd --metrics $CORE" \
       "python3 -m perfmodel.measure.one --kernel fa2_tc --run-grid $GRID"; "$NCU" --version | tail -1; } \
    > "$OUT/$NAME.command.txt"
python3 -c "from perfmodel.measure import build; build.load()"
rep=/tmp/$NAME
"$NCU" --clock-control none --cache-control all --kernel-name regex:fa2_tc_bwd --metrics "$CORE" -f -o "$rep" \
    python3 -m perfmodel.measure.one --kernel fa2_tc --run-grid "$GRID" 2>&1 | tail -5
"$NCU" --import "$rep.ncu-rep" --csv --page raw --print-units base > "$rep.csv"
python3 - "$rep.csv" "$OUT/$NAME.configs" "$OUT/$NAME.csv" <<'PY'
import csv, sys
src, cfgs, dst = sys.argv[1:]
rows = list(csv.reader(l for l in open(src) if l.startswith('"')))
header, data = rows[0], rows[2:]
configs = [l.split() for l in open(cfgs) if l.strip()]
if len(data) != 3 * len(configs):
    print(f"ncu_bwd: {len(data)} launches for {len(configs)} configurations (3 each)", file=sys.stderr)
keep = [i for i, h in enumerate(header) if "__" in h or h in ("Kernel Name", "Block Size", "Grid Size")]
names = ["B", "H", "Hkv", "N", "Nq", "Nk", "d", "dtype", "causal", "mode", "Br", "Bc", "warps"]
with open(dst, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(names + ["launch"] + [header[i] for i in keep])
    for n, r in enumerate(data[: 3 * len(configs)]):
        cfg = dict(kv.split("=") for kv in configs[n // 3])
        w.writerow([cfg.get(k, "") for k in names] + [n % 3] + [r[i].replace(",", "") for i in keep])
PY
wc -l "$OUT/$NAME.csv"
