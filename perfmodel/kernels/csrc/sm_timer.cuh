// Where and when a block runs: the SM it is on (%smid) and the GPU-wide nanosecond timer (%globaltimer), for the
// probes and traces that record each block (probe_dispatch.cu, probe_icache.cu, fa2_tc.cu built with FA2TC_TRACE).
#pragma once

__device__ __forceinline__ unsigned sm_id() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
