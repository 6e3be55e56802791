#!/usr/bin/env bash
# The fifth GPU session's third call (2026-12-02): which pipe the softmax's FP32-side instructions issue to, where
# SDPA flash's d = 32 forward runs 18% faster than the model's FP32 pipe allows. Nsight Compute's per-pipe counts
# and pipe-busy cycles of SDPA flash and fa2_tc at the same tile (128 x 128, 4 warps; B 4 H 16 N 4096, d 32 and 64);
# the metric list is what this ncu knows of the wanted ones (ncu --query-metrics); packed into OUT/session5c.tgz.
# Run from the repository root on the GPU: bash research/scripts/gpu_workloads_session5c.sh OUT
W=/tmp/session5c
source research/scripts/gpu_session_common.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
"$NCU" --query-metrics > "$W/query-metrics.txt" 2>&1
WANT="smsp__inst_executed_pipe_alu smsp__inst_executed_pipe_fma smsp__inst_executed_pipe_fmaheavy
smsp__inst_executed_pipe_fmalite smsp__inst_executed_pipe_fp16 smsp__inst_executed_pipe_xu smsp__inst_executed_pipe_lsu
smsp__inst_executed_pipe_tensor_op_hmma smsp__inst_executed_pipe_uniform smsp__inst_executed smsp__issue_active
smsp__pipe_fma_cycles_active smsp__pipe_alu_cycles_active smsp__pipe_fmaheavy_cycles_active
smsp__pipe_tensor_op_hmma_cycles_active smsp__pipe_xu_cycles_active sm__cycles_elapsed gpu__time_duration
smsp__sass_thread_inst_executed_op_fmul_pred_on smsp__sass_thread_inst_executed_op_fadd_pred_on
smsp__sass_thread_inst_executed_op_ffma_pred_on"
M=""
for m in $WANT; do
  if grep -q "^$m " "$W/query-metrics.txt"; then M="$M,$m.sum"; fi
done
M="${M#,},launch__registers_per_thread,launch__occupancy_limit_registers"
echo "$M" > "$W/metrics.txt"
run() {   # tag regex kernel params...
  local tag=$1 regex=$2; shift 2
  echo "$NCU --clock-control none --cache-control all --kernel-name regex:$regex --launch-count 1 --metrics $M" \
       "python3 -m perfmodel.measure.one --kernel $*" > "$W/ncu_$tag.command.txt"
  step 240 "$NCU" --clock-control none --cache-control all --kernel-name "regex:$regex" --launch-count 1 \
      --metrics "$M" --csv --page raw python3 -m perfmodel.measure.one --kernel "$@" > "$W/ncu_$tag.csv"
}
for d in 32 64; do
  run flash_d$d flash_fwd_kernel sdpa-flash B=4 H=16 N=4096 d=$d dtype=bf16 causal=0
  run tc_d$d 'fa2_tc(_ext)?_kernel' fa2_tc B=4 H=16 N=4096 d=$d dtype=bf16 causal=0 Br=128 Bc=128 warps=4
done
(cd "$W" && tar czf "$out/session5c.tgz" .)
ls -la "$out"
