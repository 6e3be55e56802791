// Block dispatch probe: which SM each thread block of a launch runs on, and when it starts and ends. Built as its
// own extension module by research/scripts/probe_dispatch.py.
//
// Every block records its SM (%smid) and the global timer (%globaltimer, ns, one clock for the whole GPU) when its
// first thread starts and when its work is done, then spins for work[blockIdx.x] iterations. The spin is a
// dependent FFMA chain per thread (mode 0: a warp waits on each FFMA, so blocks sharing an SM hardly slow one
// another) or eight independent chains (mode 1: the FP32 pipes saturate, so blocks sharing an SM share its pipes).
// Dynamic shared memory (requested, never touched beyond one word per thread) sets how many blocks fit on an SM.
#include <cuda_runtime.h>
#include <cstdint>

#include "sm_timer.cuh"

__global__ void probe_dispatch_kernel(const int* __restrict__ work, int* smid, unsigned long long* t0,
                                      unsigned long long* t1, float* sink, int mode) {
    extern __shared__ float smem[];
    const unsigned long long start = global_ns();
    const int n = work[blockIdx.x];
    float a[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = threadIdx.x * 1e-3f + k;
    if (mode == 0) {
        for (int i = 0; i < n; ++i) a[0] = fmaf(a[0], 0.9999f, 1e-4f);
    } else {
        for (int i = 0; i < n; ++i) {
#pragma unroll
            for (int k = 0; k < 8; ++k) a[k] = fmaf(a[k], 0.9999f, 1e-4f);
        }
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) s += a[k];
    smem[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        smid[blockIdx.x] = (int)sm_id();
        t0[blockIdx.x] = start;
        t1[blockIdx.x] = global_ns();
        if (smem[blockDim.x - 1] == -1.f) sink[0] = s;      // never true: keeps the spin
    }
}

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// work: int32[grid] spin iterations per block; smid: int32[grid]; t0, t1: int64[grid]; sink: float[1]
static void probe_dispatch(torch::Tensor work, torch::Tensor smid, torch::Tensor t0, torch::Tensor t1,
                           torch::Tensor sink, int threads, int smem_bytes, int mode) {
    const int grid = static_cast<int>(work.numel());
    TORCH_CHECK(work.is_cuda() && work.scalar_type() == torch::kInt32, "probe_dispatch: work must be CUDA int32");
    TORCH_CHECK(smid.numel() >= grid && t0.numel() >= grid && t1.numel() >= grid, "probe_dispatch: outputs too small");
    TORCH_CHECK(smem_bytes >= threads * 4, "probe_dispatch: shared memory below one word per thread");
    cudaFuncSetAttribute(probe_dispatch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    probe_dispatch_kernel<<<grid, threads, smem_bytes, at::cuda::getCurrentCUDAStream()>>>(
        work.data_ptr<int>(), smid.data_ptr<int>(), (unsigned long long*)t0.data_ptr<int64_t>(),
        (unsigned long long*)t1.data_ptr<int64_t>(), sink.data_ptr<float>(), mode);
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "probe_dispatch launch: ", cudaGetErrorString(e));
}

static int blocks_per_sm(int threads, int smem_bytes) {
    int n = 0;
    cudaFuncSetAttribute(probe_dispatch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, probe_dispatch_kernel, threads, smem_bytes);
    return n;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("probe_dispatch", &probe_dispatch, "per-block SM and start/end time");
    m.def("blocks_per_sm", &blocks_per_sm, "CUDA's occupancy for the probe kernel");
}
#endif
