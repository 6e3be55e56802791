// Instruction-cache probe: what a warp's issue rate becomes when the code its SM runs outgrows the instruction
// caches. Built as its own extension module by scripts/probe_icache.py.
//
// icache_kernel<KB>: each warp runs `iters` passes over a straight-line loop body of KB KiB of SASS: KB*64 FFMAs
// (16 bytes each on sm_70 and later) on 8 independent accumulators, so nothing but the instruction supply and the
// FP32 pipe limits its issue. `two` = 1: the blocks of an SM alternate between two distinct copies of the body
// (the first block to start on an SM runs copy A, the next copy B, and so on), so that the SM's hot code is twice
// the body, as when co-resident blocks of one kernel run different loops. Each warp writes the clock64 cycles of its
// passes; the host divides by the instructions it issued.
#include <cuda_runtime.h>
#include <cstdint>

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
    if (threadIdx.x == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        role = two ? (atomicAdd(counter + sm, 1) & 1) : 0;
    }
    __syncthreads();
    float a[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = threadIdx.x * 1e-3f + j;
    const long long t0 = clock64();
    if (role == 0) {
        for (int it = 0; it < iters; ++it) body<KB, 0>(a, x, y);
    } else {
        for (int it = 0; it < iters; ++it) body<KB, 1>(a, x, y);
    }
    const long long t1 = clock64();
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += a[j];
    const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if ((threadIdx.x & 31) == 0) cycles[blockIdx.x * warps + warp] = t1 - t0;
}

#define PERFMODEL_ICACHE_SIZES(X) X(4) X(8) X(16) X(24) X(32) X(40) X(48) X(52) X(56) X(60) X(64) X(72) X(80) X(96) X(128)

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// grid blocks of `threads` threads, each asking for smem_bytes of dynamic shared memory (which sets how many share
// an SM); counter: int32[SMs] zeros; out: float[grid * threads]; cycles: int64[grid * threads / 32]
static void run(int kb, int grid, int threads, int smem_bytes, int iters, bool two, torch::Tensor counter,
                torch::Tensor out, torch::Tensor cycles) {
    TORCH_CHECK(counter.is_cuda() && out.is_cuda() && cycles.is_cuda(), "probe_icache: CUDA tensors");
    TORCH_CHECK(out.numel() >= (int64_t)grid * threads && cycles.numel() >= (int64_t)grid * threads / 32,
                "probe_icache: output too small");
    auto stream = at::cuda::getCurrentCUDAStream();
    bool found = false;
#define PERFMODEL_ICACHE_LAUNCH(K)                                                                                   \
    if (kb == K) {                                                                                                   \
        cudaFuncSetAttribute(icache_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);            \
        icache_kernel<K><<<grid, threads, smem_bytes, stream>>>(1.0001f, 1e-7f, iters, two ? 1 : 0,                \
            counter.data_ptr<int>(), out.data_ptr<float>(),                   \
            reinterpret_cast<long long*>(cycles.data_ptr<int64_t>()));                            \
        found = true;                                                                                                \
    }
    PERFMODEL_ICACHE_SIZES(PERFMODEL_ICACHE_LAUNCH)
#undef PERFMODEL_ICACHE_LAUNCH
    TORCH_CHECK(found, "probe_icache: no body of ", kb, " KiB compiled");
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "probe_icache: ", cudaGetErrorString(e));
}

static std::vector<int64_t> sizes() {
    std::vector<int64_t> v;
#define PERFMODEL_ICACHE_LIST(K) v.push_back(K);
    PERFMODEL_ICACHE_SIZES(PERFMODEL_ICACHE_LIST)
#undef PERFMODEL_ICACHE_LIST
    return v;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("run", &run, "icache_kernel<kb> over grid blocks");
    m.def("sizes", &sizes, "the body sizes compiled, KiB");
}
#else
// compile check without torch: instantiate every size
#define PERFMODEL_ICACHE_INST(K) template __global__ void icache_kernel<K>(float, float, int, int, int*, float*, long long*);
PERFMODEL_ICACHE_SIZES(PERFMODEL_ICACHE_INST)
#endif
