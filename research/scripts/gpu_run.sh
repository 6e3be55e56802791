#!/usr/bin/env bash
# The one script that does the GPU work, for a lent GPU machine or your own: builds the bundled kernels,
# checks and times them over the committed grids, probes the GPU, collects Nsight Compute counters.
# Writes everything under $OUT (default ./out). Measurements resume: the committed CSV is copied to $OUT
# first and new rows are appended to the copy; copy it back into the repo afterwards.
#
#   research/scripts/gpu_run.sh STEP [MAX_SECONDS]
#   STEP: smoke | probe | fa1 | fa2 | fa2_tc | sdpa-flash | sdpa-cudnn | retime-tc | offgrid-tc | offgrid2-tc | offgrid3-tc | offgrid4-tc | offgrid5-tc | offgrid6-tc | offgrid7-tc | repeat-tc | clocked-tc | power-check | sdpa-fresh | head-start-check
#         | ncu | ncu-tc | ncu-dram | ncu-dram-band | ncu-dram-band2 | ncu-dram-repeat | ncu-dram-repeat-tc | bench-tc | probe-pipes | probe-fill | probe-clock | probe-coresident | probe-crowd | probe-l2-reuse | probe-l2-share | probe-l2-share-timed | probe-l2-share-fine | probe-l2-stream | probe-ldsm | lone-crowd
#         | probe-wgmma | probe-wgmma-chain | probe-tensor-clock | probe-dispatch | probe-cold | probe-writeback | trace-tc | trace-tc-late | trace-tc-fair | trace-tc-phase | trace-tc-phase-cold | trace-tc-short | sdpa-kernels | sdpa-calls | ncu-stalls
#         | ncu-sdpa-sass | ncu-flash-sass | ncu-combine-sass | ncu-combine-warm | sdpa-calls-splitkv | ncu-split-sass | ncu-flash-sass-bf16 | ncu-tc-sass | ncu-tc-sass-full | probe-icache | probe-power | sass-sm89 | sass-tc | all     (several steps: "research/scripts/gpu_run.sh 'retime-tc sdpa-fresh' 200")
#   power-check: long fa2_tc launches with the SM clock and power sampled (research/data/grids/power-check.yaml)
#   clocked-tc: time the whole fa2_tc grid with each run's SM clock measured (RUN=2: a second file)
#   repeat-tc: time the whole fa2_tc grid again into fa2_tc.repeat.csv (the data's own repeatability)
#   retime-tc: measure again the fa2_tc rows whose recorded timing was disturbed (measure --retime-unstable)
#   sass-sm89: sm_86/sm_89 builds of probe, fa1, fa2 and fa2_tc disassembled (no kernel runs; needs cuobjdump)
#   sass-tc: fa2_tc's measured build for sm_90, sm_89, sm_86 and sm_80, every instance disassembled (no kernel runs)
#   PACK=1: pack everything under $OUT into $OUT/out.tar.gz at the end (a lent machine returns at most 8 files)
set -euo pipefail
cd "$(dirname "$0")/../.."
step=${1:-all}
max_s=${2:-480}
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PERFMODEL_BUILD_DIR=${PERFMODEL_BUILD_DIR:-/tmp/perfmodel-build}
gpu_key=${GPU_KEY:-h100}              # where the data goes: examples/measurements/$GPU_KEY (skip lists and
                                      # the rest: research/data/$GPU_KEY)
grids=${GRID_PREFIX:-$gpu_key}        # which grids: examples/grids/$GRID_PREFIX-fa1.yaml, ...-fa2.yaml
data=examples/measurements/$gpu_key
rdata=research/data/$gpu_key
pm() { python3 -m perfmodel "$@"; }
# ncu_probe SCRIPT STEM KERNEL [METRIC]: a two-step probe (research/scripts/SCRIPT.py launch / join) under Nsight Compute,
# which flushes L2 before each launch: its METRICS (and METRIC, where this ncu knows it) into $OUT/STEM.json
ncu_probe() {
  local script=$1 stem=$2 kernel=$3 extra=${4:-} ncu m
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
  m=$(python3 -c "import sys; sys.path.insert(0, 'research/scripts'); import $script as p; print(','.join(p.METRICS))")
  if [ -n "$extra" ] && "$ncu" --query-metrics 2>/dev/null | grep "^$extra " >/dev/null; then m="$m,$extra.sum"; fi
  "$ncu" --clock-control none --cache-control all --kernel-name "regex:$kernel" --metrics "$m" -f -o "/tmp/$stem" \
    python3 "research/scripts/$script.py" launch "$OUT/${stem}_configs.json"
  "$ncu" --import "/tmp/$stem.ncu-rep" --csv --page raw --print-units base > "$OUT/${stem}_ncu.csv"
  python3 "research/scripts/$script.py" join "$OUT/${stem}_ncu.csv" "$OUT/${stem}_configs.json" "$OUT/$stem.json"
}

{ nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv; nvcc --version | tail -1;
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; } 2>&1 | tee "$OUT/env.txt"

measure() {  # kernel grid
  local k=$1 grid=$2
  [ -f "$data/$k.csv" ] && cp "$data/$k.csv" "$OUT/$k.csv"
  [ -f "$rdata/$k.skipped.csv" ] && cp "$rdata/$k.skipped.csv" "$OUT/$k.skipped.csv"
  pm measure --kernel "$k" --grid "$grid" --out "$OUT/$k.csv" --max-seconds "$max_s" "${@:3}"
}

for step in $step; do
case $step in
  smoke)
    pm measure --kernel fa1 --grid examples/grids/seed.yaml --out "$OUT/smoke-fa1.csv" --verbose
    pm measure --kernel fa2 --grid examples/grids/seed.yaml --out "$OUT/smoke-fa2.csv" ;;
  probe)
    pm probe --out "$OUT/calibration.yaml" ;;
  fa1) measure fa1 examples/grids/$grids-fa1.yaml ;;
  fa2) measure fa2 examples/grids/$grids-fa2.yaml ;;
  fa2_tc) measure fa2_tc examples/grids/$grids-fa2_tc.yaml ;;
  sdpa-flash|sdpa-cudnn) measure $step examples/grids/$grids-sdpa.yaml ;;
  retime-tc)
    measure fa2_tc examples/grids/$grids-fa2_tc.yaml --retime-unstable ;;
  offgrid-tc|offgrid2-tc|offgrid3-tc|offgrid4-tc|offgrid5-tc|offgrid6-tc|offgrid7-tc)   # fa2_tc, SDPA flash and cuDNN at shapes outside the committed grids, into *.offgrid.csv
                            # (offgrid2..7: the later sets, *.offgrid2.csv ... *.offgrid7.csv; 7: H200 only); resumes
    set_=${step%-tc}
    for k in fa2_tc sdpa-flash sdpa-cudnn; do
      g=examples/grids/$grids-$set_-$([ $k = fa2_tc ] && echo tc || echo sdpa).yaml
      [ -f "$data/$k.$set_.csv" ] && cp "$data/$k.$set_.csv" "$OUT/$k.$set_.csv"
      [ -f "$rdata/$k.$set_.skipped.csv" ] && cp "$rdata/$k.$set_.skipped.csv" "$OUT/$k.$set_.skipped.csv"
      pm measure --kernel $k --grid "$g" --out "$OUT/$k.$set_.csv" --max-seconds "$max_s"
    done ;;
  power-check)        # long launches timed while nvidia-smi samples SM clock and power every 50 ms
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu \
      --format=csv,noheader -lms 50 > "$OUT/power-check.smi.csv" &
    smi=$!
    pm measure --kernel fa2_tc --grid research/data/grids/power-check.yaml --out "$OUT/power-check.csv" --max-seconds "$max_s"
    kill $smi ;;
  repeat-tc)          # the whole fa2_tc grid timed again from scratch, in a second file (research/scripts/repeatability.py)
    pm measure --kernel fa2_tc --grid examples/grids/$grids-fa2_tc.yaml --out "$OUT/fa2_tc.repeat.csv" \
      --max-seconds "$max_s" ;;
  clocked-tc)         # the whole fa2_tc grid timed with the spin clocks (bench.py) into fa2_tc.clocked$RUN.csv; a
                      # rerun with the file in $OUT resumes it (the committed copies are renamed fa2_tc.csv, .repeat.csv)
    pm measure --kernel fa2_tc --grid examples/grids/$grids-fa2_tc.yaml --out "$OUT/fa2_tc.clocked${RUN:-}.csv" \
      --max-seconds "$max_s" ;;
  sdpa-fresh)         # both SDPA kernels from scratch (the timing method changed: bench.HEAD_START_S)
    for k in sdpa-flash sdpa-cudnn; do
      pm measure --kernel $k --grid examples/grids/$grids-sdpa.yaml --out "$OUT/$k.csv" --max-seconds "$max_s"
    done ;;
  head-start-check)   # small fa2_tc problems again, to compare with the committed rows timed without a head start
    pm measure --kernel fa2_tc --grid research/data/grids/check-head-start.yaml --out "$OUT/fa2_tc-head-start.csv" ;;
  ncu) bash research/scripts/ncu_run.sh "$OUT" ;;
  ncu-tc) bash research/scripts/ncu_run.sh "$OUT" fa2_tc:research/data/grids/ncu-fa2_tc.yaml ;;
  ncu-dram)           # DRAM and L2 counters only, every kernel's grid in one profiled process: ncu_dram_*.csv
    NCU_METRICS=dram NCU_ONE_PROCESS=1 bash research/scripts/ncu_run.sh "$OUT" fa1:research/data/grids/ncu-dram-fa1.yaml \
      fa2:research/data/grids/ncu-dram-fa2.yaml fa2_tc:research/data/grids/ncu-dram-fa2_tc.yaml ;;
  ncu-dram-band)      # fa1's DRAM and L2 counters at head counts inside the band where its re-reads start to miss
    NCU_METRICS=dram NCU_ONE_PROCESS=1 bash research/scripts/ncu_run.sh "$OUT" fa1:research/data/grids/ncu-dram-fa1-band.yaml ;;
  ncu-dram-band2)     # fa2's and fa2_tc's DRAM and L2 counters between the sweep's head counts and shapes (held out)
    NCU_METRICS=dram NCU_ONE_PROCESS=1 bash research/scripts/ncu_run.sh "$OUT" fa2:research/data/grids/ncu-dram-fa2-band.yaml \
      fa2_tc:research/data/grids/ncu-dram-fa2_tc-band.yaml ;;
  ncu-dram-repeat)    # the same launches three times each (B x H = 1 x h, 2 x h/2, 4 x h/4) in fa1's band: counter noise
    NCU_METRICS=dram NCU_ONE_PROCESS=1 bash research/scripts/ncu_run.sh "$OUT" fa1:research/data/grids/ncu-dram-fa1-repeat.yaml ;;
  ncu-dram-repeat-tc) # fa2_tc's long-N launches (K/V re-read across waves) repeated, in two processes: counter noise
    for run in run1 run2; do
      NCU_METRICS=dram NCU_ONE_PROCESS=1 bash research/scripts/ncu_run.sh "$OUT/$run" fa2_tc:research/data/grids/ncu-dram-fa2_tc-repeat.yaml
    done ;;
  bench-tc) python3 research/scripts/fa2_tc_bench.py bench --out "$OUT/fa2_tc_vs_sdpa.json" ;;
  probe-pipes) python3 research/scripts/probe_pipes.py "$OUT/pipes.json" ;;
  probe-fill) python3 research/scripts/probe_fill.py "$OUT/fill.json" ;;             # cp.async fills beside ldmatrix reads
  probe-coresident) python3 research/scripts/probe_coresident.py "$OUT/coresident.json" ;;   # one tile at 1, 2, 4 blocks a SM
  probe-power) python3 research/scripts/probe_power.py "$OUT/power.json" ;;      # watts and SM clock under each pipe's load
  probe-clock) python3 research/scripts/probe_clock.py "$OUT/clock.json" ;;          # spin clocks: in-kernel timer against events
  probe-crowd) python3 research/scripts/probe_crowd.py "$OUT/crowd.json" ;;          # tile waits from L2 / DRAM against SMs loading
  probe-l2-reuse)     # L2's re-use misses by re-use distance, read-only, re-written and beside a stream (ncu counts)
    python3 -c "from perfmodel.measure import build; build.load_probe()"    # built outside the profiler
    ncu_probe probe_l2_reuse l2_reuse probe_reuse ;;
  probe-l2-share)     # L2's re-read misses by how many blocks read a line and where they sit (ncu counts)
    python3 -c "from perfmodel.measure import probe; probe.share_module()"
    # and the traffic between the two L2 partitions, where this GPU's ncu knows the counter
    ncu_probe probe_l2_share l2_share share_kernel lts__t_sectors_srcunit_ltcfabric ;;
  probe-l2-stream) python3 research/scripts/probe_l2_stream.py "$OUT/l2_stream.json" ;;   # cp.async fills from L2 / DRAM, nothing else running
  probe-l2-share-timed) python3 research/scripts/probe_l2_share.py timed "$OUT/l2_share_timed.json" ;;  # the same room, timed (perfmodel probe's way)
  probe-l2-share-fine)  # the room counted at the timed step's 41 sizes (every block reading one buffer)
    python3 -c "from perfmodel.measure import probe; probe.share_module()"
    SHARE_SET=fine ncu_probe probe_l2_share l2_share_fine share_kernel ;;
  sass-sm89)          # what nvcc makes of the sources for Ada: listings to compare with sm_86's (gpus/arch/sm_89.yaml, M2)
    d="$OUT/sass_sm89"; mkdir -p "$d"
    tf="-std=c++17 -O3 -lineinfo -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__"
    tf="$tf -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr"
    for a in 86 89; do
      for k in measure/probe_csrc/probe kernels/csrc/fa1 kernels/csrc/fa2; do
        nvcc -O3 -arch=sm_$a -Iperfmodel/kernels/csrc -cubin "perfmodel/$k.cu" -o "/tmp/${k##*/}_$a.cubin"
        cuobjdump -sass "/tmp/${k##*/}_$a.cubin" > "$d/${k##*/}_sm$a.sass"
      done
      # shellcheck disable=SC2086
      nvcc $tf -gencode=arch=compute_$a,code=sm_$a -cubin perfmodel/kernels/csrc/fa2_tc.cu -o "/tmp/tc_$a.cubin"
      cuobjdump -sass "/tmp/tc_$a.cubin" | awk '/Function :/{f=($0 ~ /fa2_tc_kernelI6__half/)} f' \
        | grep -v '^ *\/\* 0x[0-9a-f]* \*\/ *$' | sed 's# */\* 0x[0-9a-f]* \*/##' > "$d/fa2_tc_sm$a.sass"
    done ;;
  sass-tc)            # fa2_tc's code, every instance, for the instruction counts read off it (kernels/fa2_tc.py CODE)
    d="$OUT/sass_tc"; mkdir -p "$d"
    for a in 90 89 86 80; do python3 research/scripts/sass_phases.py --build measured "$d/fa2_tc_sm$a.sass" $a & done; wait
    { nvcc --version | tail -2; cuobjdump --version | tail -1; date -u; echo "research/scripts/gpu_run.sh sass-tc"; } > "$d/env.txt" ;;
  probe-ldsm)         # ldmatrix wavefronts per clock with unmergeable loads, and the loop's SASS (LDSM per body)
    python3 research/scripts/probe_ldsm.py "$OUT/ldsm.json"
    so=$(find "$PERFMODEL_BUILD_DIR" -name 'perfmodel_probe_*.so' | head -1)
    cuobjdump -sass "$so" | awk '/Function :/{f=($0 ~ /probe_ldsm|probe_fill/)} f' > "$OUT/ldsm.sass" ;;
  lone-crowd)         # lone fa2_tc blocks as more SMs run, with the L2 flushed before each run and without
    pm measure --kernel fa2_tc --grid research/data/grids/lone-crowd.yaml --out "$OUT/lone-crowd.csv"
    pm measure --kernel fa2_tc --grid research/data/grids/lone-crowd.yaml --out "$OUT/lone-crowd.noflush.csv" --no-flush ;;
  probe-wgmma) python3 research/scripts/probe_wgmma.py "$OUT/wgmma.json" ;;           # sm_90 only
  probe-wgmma-chain) python3 research/scripts/probe_wgmma_chain.py "$OUT/wgmma_chain.json" ;;   # a wgmma group's wait (sm_90)
  probe-tensor-clock) python3 research/scripts/probe_tensor_clock.py "$OUT/tensor_clock.json" ;;  # wgmma/mma.sync clock off the power limit (sm_90)
  probe-dispatch) python3 research/scripts/probe_dispatch.py "$OUT/dispatch.json" ;;
  probe-cold) python3 research/scripts/probe_cold.py "$OUT/cold.json" ;;
  probe-writeback) python3 research/scripts/probe_writeback.py "$OUT/writeback.json" ;;   # the written flush's cost by bytes read
  trace-tc) python3 research/scripts/trace_fa2_tc.py "$OUT/fa2_tc_trace.json" ;;
  trace-tc-late) TRACE_SET=late python3 research/scripts/trace_fa2_tc.py "$OUT/fa2_tc_trace_late.json" ;;
  trace-tc-fair) TRACE_SET=fair GPU_KEY=$gpu_key python3 research/scripts/trace_fa2_tc.py "$OUT/fa2_tc_trace_fair.json" ;;
  trace-tc-phase) TRACE_SET=phase GPU_KEY=$gpu_key python3 research/scripts/trace_fa2_tc.py "$OUT/fa2_tc_trace_phase.json" ;;
  trace-tc-phase-cold) TRACE_SET=phase-cold GPU_KEY=$gpu_key python3 research/scripts/trace_fa2_tc.py "$OUT/fa2_tc_trace_phase_cold.json" ;;
  trace-tc-short) TRACE_SET=short GPU_KEY=$gpu_key python3 research/scripts/trace_fa2_tc.py "$OUT/fa2_tc_trace_short.json" ;;
  sdpa-kernels) python3 research/scripts/sdpa_kernels.py "$OUT/sdpa_kernels.json" ;;
  sdpa-calls) python3 research/scripts/sdpa_calls.py "$OUT/sdpa_calls.json" ;;
  sdpa-calls-splitkv) SDPA_CALLS_SET=splitkv python3 research/scripts/sdpa_calls.py "$OUT/sdpa_calls_splitkv.json" ;;
  ncu-stalls) bash research/scripts/ncu_sdpa_stalls.sh "$OUT" ;;
  ncu-sdpa-sass) bash research/scripts/ncu_sdpa_sass.sh "$OUT" ;;
  ncu-flash-sass)     # flash's causal launches, ragged (N = 1000) and even (N = 1024), and ragged non-causal
    mkdir -p "$OUT/flash_sass"
    bash research/scripts/ncu_sdpa_sass.sh "$OUT/flash_sass" FLASH_ATTENTION:flash_fwd_kernel:32:16:1000:64:1:ragged_causal_d64 \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1024:64:1:even_causal_d64 \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1000:64:0:ragged_noncausal_d64 \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1000:128:1:ragged_causal_d128 \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1024:128:1:even_causal_d128 ;;
  ncu-combine-sass)   # split-KV's two kernels at the small grids flash splits (B1 N512): the combine's instruction chain
    mkdir -p "$OUT/combine_sass"
    bash research/scripts/ncu_sdpa_sass.sh "$OUT/combine_sass" \
      FLASH_ATTENTION:splitkv_combine_kernel:1:16:512:128:0:combine_d128 \
      FLASH_ATTENTION:splitkv_combine_kernel:1:8:512:64:0:combine_d64 \
      FLASH_ATTENTION:flash_fwd_splitkv_kernel:1:16:512:128:0:splitkv_d128 ;;
  ncu-combine-warm)   # the same combine launches with the caches as the split kernel left them, warp states too
    mkdir -p "$OUT/combine_warm"
    NCU_CACHE=none NCU_SECTIONS="--section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis" \
      bash research/scripts/ncu_sdpa_sass.sh "$OUT/combine_warm" \
      FLASH_ATTENTION:splitkv_combine_kernel:1:16:512:128:0:warm_combine_h16_d128 \
      FLASH_ATTENTION:splitkv_combine_kernel:1:8:512:128:0:warm_combine_h8_d128 \
      FLASH_ATTENTION:splitkv_combine_kernel:1:8:512:64:0:warm_combine_h8_d64 \
      FLASH_ATTENTION:flash_fwd_splitkv_kernel:1:8:512:128:0:split_h8_d128 ;;
  ncu-flash-sass-bf16)   # the same causal launches in bf16: is their code the size of fp16's?
    mkdir -p "$OUT/flash_sass_bf16"
    SDPA_DTYPE=bf16 bash research/scripts/ncu_sdpa_sass.sh "$OUT/flash_sass_bf16" \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1000:64:1:ragged_causal_d64 \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1024:64:1:even_causal_d64 \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1000:128:1:ragged_causal_d128 \
      FLASH_ATTENTION:flash_fwd_kernel:32:16:1024:128:1:even_causal_d128 ;;
  ncu-split-sass)     # the split kernel at 1, 2 and 4 key tiles a block: what its prologue and epilogue execute
    mkdir -p "$OUT/split_sass"
    bash research/scripts/ncu_sdpa_sass.sh "$OUT/split_sass" \
      FLASH_ATTENTION:flash_fwd_splitkv_kernel:1:8:512:64:0:split_h8_n512_d64 \
      FLASH_ATTENTION:flash_fwd_splitkv_kernel:1:8:1000:64:0:split_h8_n1000_d64 \
      FLASH_ATTENTION:flash_fwd_splitkv_kernel:1:8:1000:128:0:split_h8_n1000_d128 \
      FLASH_ATTENTION:flash_fwd_splitkv_kernel:1:8:512:128:1:split_h8_n512_d128_causal ;;
  ncu-tc-sass)        # fa2_tc's per-instruction stalls, lone blocks and many waves (research/scripts/ncu_tc_sass.sh)
    mkdir -p "$OUT/tc_sass"; bash research/scripts/ncu_tc_sass.sh "$OUT/tc_sass" ;;
  ncu-tc-sass-full)   # the same at many waves (B32 H16 N2048) for the three d = 128 tiles and two d = 64 ones
    mkdir -p "$OUT/tc_sass"; bash research/scripts/ncu_tc_sass.sh "$OUT/tc_sass" 32:16:2048:128:0:128:64:4:full_d128_128x64w4 \
      32:16:2048:128:0:64:64:4:full_d128_64x64w4 32:16:2048:128:0:128:128:8:full_d128_128x128w8 \
      32:16:2048:64:0:64:64:4:full_d64_64x64w4 32:16:2048:64:0:128:128:4:full_d64_128x128w4 ;;
  probe-icache) python3 research/scripts/probe_icache.py "$OUT/icache.json" ;;
  all)
    pm probe --out "$OUT/calibration.yaml"
    measure fa1 examples/grids/$grids-fa1.yaml
    measure fa2 examples/grids/$grids-fa2.yaml ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
done
if [ "${PACK:-0}" = 1 ]; then
  tar -C "$OUT" -czf /tmp/out.tar.gz . && find "$OUT" -type f -delete && mv /tmp/out.tar.gz "$OUT/"
fi
