// Instruction-cache probe: what a warp's issue rate becomes when the code its SM runs outgrows the instruction
// caches. Built as its own extension module by research/scripts/probe_icache.py.
//
// icache_kernel<KB>: each warp runs `iters` passes over a straight-line loop body of KB KiB of SASS: KB*64 FFMAs
// (16 bytes each on sm_70 and later) on 8 independent accumulators, so nothing but the instruction supply and the
// FP32 pipe limits its issue. `two` = 1: the blocks of an SM alternate between two distinct copies of the body
// (the first block to start on an SM runs copy A, the next copy B, and so on), so that the SM's hot code is twice
// the body, as when co-resident blocks of one kernel run different loops. Each warp writes the clock64 cycles of its
// passes; the host divides by the instructions it issued.
#include <cuda_runtime.h>
#include <cstdint>

#include "sm_timer.cuh"

// every warp starts its 8 accumulators from its thread index and writes their sum, so that no FFMA is dead code
__device__ __forceinline__ void start_values(float (&a)[8]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = threadIdx.x * 1e-3f + j;
}

__device__ __forceinline__ void write_sum(const float (&a)[8], float* __restrict__ out) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += a[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int KB, int COPY>
__device__ __forceinline__ void body(float (&a)[8], float x, float y) {
#pragma unroll
    for (int i = 0; i < KB * 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] = COPY ? fmaf(a[j], y, x) : fmaf(a[j], x, y);
    }
}

template <int KB>
__global__ void icache_kernel(float x, float y, int iters, int two, int* __restrict__ counter,
                              float* __restrict__ out, long long* __restrict__ cycles) {
    __shared__ int role;
    if (threadIdx.x == 0) role = two ? (atomicAdd(counter + sm_id(), 1) & 1) : 0;
    __syncthreads();
    float a[8];
    start_values(a);
    const long long t0 = clock64();
    if (role == 0) {
        for (int it = 0; it < iters; ++it) body<KB, 0>(a, x, y);
    } else {
        for (int it = 0; it < iters; ++it) body<KB, 1>(a, x, y);
    }
    const long long t1 = clock64();
    write_sum(a, out);
    const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) cycles[blockIdx.x * warps + warp] = t1 - t0;
}

// icache_streams_kernel<KB>: the same, with `streams` (1 to 8) distinct copies of the body: the blocks of an SM take
// copies 0, 1, 2, ... in the order they start there, so an SM running S blocks of S streams holds S * KB KiB of hot
// code, as when more than two co-resident blocks (or their warps) sit in different loops. The copies differ in an
// immediate operand (FFMA R, R, imm, R), so their instruction bytes differ.
template <int KB, int COPY>
__device__ __forceinline__ void body_imm(float (&a)[8], float x) {
#pragma unroll
    for (int i = 0; i < KB * 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], x, 1e-7f * (COPY + 1));
    }
}

template <int KB>
__global__ void icache_streams_kernel(float x, int iters, int streams, int* __restrict__ counter,
                                      float* __restrict__ out, long long* __restrict__ cycles,
                                      int* __restrict__ smids) {
    __shared__ int role;
    if (threadIdx.x == 0) {
        const unsigned sm = sm_id();
        role = atomicAdd(counter + sm, 1) % streams;
        smids[blockIdx.x] = (int)sm;
    }
    __syncthreads();
    float a[8];
    start_values(a);
    const long long t0 = clock64();
    switch (role) {
#define PERFMODEL_ICACHE_ROLE(C) \
        case C: for (int it = 0; it < iters; ++it) body_imm<KB, C>(a, x); break;
        PERFMODEL_ICACHE_ROLE(0) PERFMODEL_ICACHE_ROLE(1) PERFMODEL_ICACHE_ROLE(2) PERFMODEL_ICACHE_ROLE(3)
        PERFMODEL_ICACHE_ROLE(4) PERFMODEL_ICACHE_ROLE(5) PERFMODEL_ICACHE_ROLE(6) PERFMODEL_ICACHE_ROLE(7)
#undef PERFMODEL_ICACHE_ROLE
    }
    const long long t1 = clock64();
    write_sum(a, out);
    const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {          // the SM's own clock: a span per SM from its warps' first start to last end
        cycles[2 * (blockIdx.x * warps + warp)] = t0;
        cycles[2 * (blockIdx.x * warps + warp) + 1] = t1;
    }
}

// icache_layout_kernel<LOOP_KB>: a FlashAttention block's code layout. Each block first runs `once` distinct 8-KiB
// straight-line chunks one time (0 to 14 of them: up to 112 KiB of code that each warp passes through once, as a
// block runs its prologue, its unrolled masking steps and its epilogue), then `base + (block % period) * step`
// passes of one LOOP_KB-KiB body (its main loop, one pass per further key tile: with period 8 the blocks' passes
// vary as a causal grid's do). Two stamps per warp and each block's SM, as icache_streams_kernel.
template <int KB>
__global__ void icache_layout_kernel(float x, int once, int base, int period, int step, int* __restrict__ counter,
                                     float* __restrict__ out, long long* __restrict__ cycles,
                                     int* __restrict__ smids) {
    if (threadIdx.x == 0) {
        const unsigned sm = sm_id();
        atomicAdd(counter + sm, 1);
        smids[blockIdx.x] = (int)sm;
    }
    __syncthreads();
    float a[8];
    start_values(a);
    const long long t0 = clock64();
    switch (once) {             // falls through: `once` chunks, each its own code
#define PERFMODEL_ICACHE_CHUNK(C) \
        case C + 1: body_imm<8, 8 + C>(a, x);
        PERFMODEL_ICACHE_CHUNK(13) PERFMODEL_ICACHE_CHUNK(12) PERFMODEL_ICACHE_CHUNK(11) PERFMODEL_ICACHE_CHUNK(10)
        PERFMODEL_ICACHE_CHUNK(9) PERFMODEL_ICACHE_CHUNK(8) PERFMODEL_ICACHE_CHUNK(7) PERFMODEL_ICACHE_CHUNK(6)
        PERFMODEL_ICACHE_CHUNK(5) PERFMODEL_ICACHE_CHUNK(4) PERFMODEL_ICACHE_CHUNK(3) PERFMODEL_ICACHE_CHUNK(2)
        PERFMODEL_ICACHE_CHUNK(1) PERFMODEL_ICACHE_CHUNK(0)
#undef PERFMODEL_ICACHE_CHUNK
        default: break;
    }
    const int passes = base + (int)(blockIdx.x % period) * step;
    for (int it = 0; it < passes; ++it) body_imm<KB, 0>(a, x);
    const long long t1 = clock64();
    write_sum(a, out);
    const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
        cycles[2 * (blockIdx.x * warps + warp)] = t0;
        cycles[2 * (blockIdx.x * warps + warp) + 1] = t1;
    }
}

#define PERFMODEL_ICACHE_LAYOUT_LOOPS(X) X(16) X(24)
#define PERFMODEL_ICACHE_LAYOUT_CHUNKS 14

#define PERFMODEL_ICACHE_STREAM_SIZES(X) X(4) X(8) X(12) X(16) X(24) X(32)

#define PERFMODEL_ICACHE_SIZES(X) X(4) X(8) X(16) X(24) X(32) X(40) X(48) X(52) X(56) X(60) X(64) X(72) X(80) X(96) X(128)

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// counter: int32[SMs] zeros; out: float[grid * threads]; cycles: int64[stamps per warp * grid * threads / 32]
static void check_outputs(const torch::Tensor& counter, const torch::Tensor& out, const torch::Tensor& cycles,
                          int grid, int threads, int stamps) {
    TORCH_CHECK(counter.is_cuda() && out.is_cuda() && cycles.is_cuda(), "probe_icache: CUDA tensors");
    TORCH_CHECK(out.numel() >= (int64_t)grid * threads && cycles.numel() >= (int64_t)stamps * grid * threads / 32,
                "probe_icache: output too small");
}

// grid blocks of `threads` threads, each asking for smem_bytes of dynamic shared memory (which sets how many share
// an SM), on the current stream; the launch's error checked
template <typename Kernel, typename... Args>
static void launch(Kernel kernel, int grid, int threads, int smem_bytes, Args... args) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    kernel<<<grid, threads, smem_bytes, at::cuda::getCurrentCUDAStream()>>>(args...);
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "probe_icache: ", cudaGetErrorString(e));
}

// icache_kernel<kb>; cycles: one stamp per warp (its passes' clock64 cycles)
static void run(int kb, int grid, int threads, int smem_bytes, int iters, bool two, torch::Tensor counter,
                torch::Tensor out, torch::Tensor cycles) {
    check_outputs(counter, out, cycles, grid, threads, 1);
    bool found = false;
#define PERFMODEL_ICACHE_LAUNCH(K)                                                                                   \
    if (kb == K) {                                                                                                   \
        launch(icache_kernel<K>, grid, threads, smem_bytes, 1.0001f, 1e-7f, iters, two ? 1 : 0,                      \
               counter.data_ptr<int>(), out.data_ptr<float>(), reinterpret_cast<long long*>(cycles.data_ptr<int64_t>())); \
        found = true;                                                                                                \
    }
    PERFMODEL_ICACHE_SIZES(PERFMODEL_ICACHE_LAUNCH)
#undef PERFMODEL_ICACHE_LAUNCH
    TORCH_CHECK(found, "probe_icache: no body of ", kb, " KiB compiled");
}

// icache_streams_kernel<kb> with `streams` distinct bodies; cycles: two stamps per warp (its start and end
// clock64); smids: int32[grid]
static void run_streams(int kb, int grid, int threads, int smem_bytes, int iters, int streams, torch::Tensor counter,
                        torch::Tensor out, torch::Tensor cycles, torch::Tensor smids) {
    check_outputs(counter, out, cycles, grid, threads, 2);
    TORCH_CHECK(streams >= 1 && streams <= 8, "probe_icache: 1 to 8 streams");
    TORCH_CHECK(smids.is_cuda() && smids.numel() >= grid, "probe_icache: smids too small");
    bool found = false;
#define PERFMODEL_ICACHE_LAUNCH_S(K)                                                                                 \
    if (kb == K) {                                                                                                   \
        launch(icache_streams_kernel<K>, grid, threads, smem_bytes, 1.0001f, iters, streams, counter.data_ptr<int>(), \
               out.data_ptr<float>(), reinterpret_cast<long long*>(cycles.data_ptr<int64_t>()), smids.data_ptr<int>()); \
        found = true;                                                                                                \
    }
    PERFMODEL_ICACHE_STREAM_SIZES(PERFMODEL_ICACHE_LAUNCH_S)
#undef PERFMODEL_ICACHE_LAUNCH_S
    TORCH_CHECK(found, "probe_icache: no streams body of ", kb, " KiB compiled");
}

// icache_layout_kernel<loop_kb>; cycles: two stamps per warp; smids: int32[grid]
static void run_layout(int loop_kb, int grid, int threads, int smem_bytes, int once, int base, int period, int step,
                       torch::Tensor counter, torch::Tensor out, torch::Tensor cycles, torch::Tensor smids) {
    check_outputs(counter, out, cycles, grid, threads, 2);
    TORCH_CHECK(once >= 0 && once <= PERFMODEL_ICACHE_LAYOUT_CHUNKS && period >= 1 && base >= 0 && step >= 0,
                "probe_icache: layout arguments");
    TORCH_CHECK(smids.is_cuda() && smids.numel() >= grid, "probe_icache: smids too small");
    bool found = false;
#define PERFMODEL_ICACHE_LAUNCH_L(K)                                                                                 \
    if (loop_kb == K) {                                                                                              \
        launch(icache_layout_kernel<K>, grid, threads, smem_bytes, 1.0001f, once, base, period, step,               \
               counter.data_ptr<int>(), out.data_ptr<float>(), reinterpret_cast<long long*>(cycles.data_ptr<int64_t>()), \
               smids.data_ptr<int>());                                                                               \
        found = true;                                                                                                \
    }
    PERFMODEL_ICACHE_LAYOUT_LOOPS(PERFMODEL_ICACHE_LAUNCH_L)
#undef PERFMODEL_ICACHE_LAUNCH_L
    TORCH_CHECK(found, "probe_icache: no layout loop of ", loop_kb, " KiB compiled");
}

#define PERFMODEL_ICACHE_ITEM(K) K,
static std::vector<int64_t> sizes() { return {PERFMODEL_ICACHE_SIZES(PERFMODEL_ICACHE_ITEM)}; }
static std::vector<int64_t> stream_sizes() { return {PERFMODEL_ICACHE_STREAM_SIZES(PERFMODEL_ICACHE_ITEM)}; }
static std::vector<int64_t> layout_loops() { return {PERFMODEL_ICACHE_LAYOUT_LOOPS(PERFMODEL_ICACHE_ITEM)}; }
#undef PERFMODEL_ICACHE_ITEM

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("run", &run, "icache_kernel<kb> over grid blocks");
    m.def("sizes", &sizes, "the body sizes compiled, KiB");
    m.def("run_streams", &run_streams, "icache_streams_kernel<kb> over grid blocks, `streams` distinct bodies");
    m.def("stream_sizes", &stream_sizes, "the body sizes of the streams kernel, KiB");
    m.def("run_layout", &run_layout, "icache_layout_kernel<loop_kb>: once-run chunks, then a loop");
    m.def("layout_loops", &layout_loops, "the loop body sizes of the layout kernel, KiB");
    m.def("layout_chunks", []() { return PERFMODEL_ICACHE_LAYOUT_CHUNKS; }, "8-KiB once-run chunks available");
}
#else
// compile check without torch: instantiate every size
#define PERFMODEL_ICACHE_INST(K) template __global__ void icache_kernel<K>(float, float, int, int, int*, float*, long long*);
PERFMODEL_ICACHE_SIZES(PERFMODEL_ICACHE_INST)
#define PERFMODEL_ICACHE_INST_S(K) \
    template __global__ void icache_streams_kernel<K>(float, int, int, int*, float*, long long*, int*);
PERFMODEL_ICACHE_STREAM_SIZES(PERFMODEL_ICACHE_INST_S)
#define PERFMODEL_ICACHE_INST_L(K) \
    template __global__ void icache_layout_kernel<K>(float, int, int, int, int, int*, float*, long long*, int*);
PERFMODEL_ICACHE_LAYOUT_LOOPS(PERFMODEL_ICACHE_INST_L)
#endif
