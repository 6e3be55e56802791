// Streaming probe: the rate at which cp.async.cg fills shared memory from L2 (or DRAM) when nothing else runs, as
// FlashAttention-2's K/V tile loads do. Built as its own extension module by research/scripts/probe_l2_stream.py.
//
// stream_kernel<S>: block b walks slice b / group of `src` (slice16 16-byte words) tile by tile, `iters` tiles in
// all (wrapping round the slice), each tile `tile16` 16-byte cp.async.cg copies spread over the block's threads, into
// a ring of S tiles of shared memory: S - 1 tiles stay in flight while it waits for the oldest (wait_group S - 2),
// then a barrier, as a pipelined FA2 block waits for its next K or V tile. Nothing reads the tiles. `group`
// consecutive blocks walk the same slice at about the same time (1: every block its own lines).
#include <cuda_runtime.h>

template <int S>
__global__ void stream_kernel(const uint4* __restrict__ src, long long slice16, int group, int tile16, int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) uint4 ring[];
    const uint4* mine = src + (long long)(blockIdx.x / group) * slice16;
    const long long ntiles = slice16 / tile16;
    const unsigned base = (unsigned)__cvta_generic_to_shared(ring);
    auto issue = [&](int t) {
        const uint4* g = mine + (long long)(t % ntiles) * tile16;
        const unsigned dst = base + 16u * (unsigned)((t % S) * tile16);
        for (int i = threadIdx.x; i < tile16; i += blockDim.x)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst + 16u * (unsigned)i), "l"(g + i));
        asm volatile("cp.async.commit_group;\n");
    };
    for (int t = 0; t < S - 1; ++t) issue(t);
    for (int t = 0; t < iters; ++t) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(S - 2) : "memory");   // tile t has landed
        __syncthreads();                                                       // every thread is past tile t - 1's slot
        issue(t + S - 1);
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// src: a CUDA buffer of at least ceil(grid / group) slices of slice_bytes; stages: 2, 3, 4 or 8; smem_bytes: the
// dynamic shared memory a block holds (at least the ring's), which sets how many blocks share an SM
static void stream(torch::Tensor src, int64_t slice_bytes, int group, int tile_bytes, int stages, int iters, int grid,
                   int threads, int smem_bytes) {
    TORCH_CHECK(src.is_cuda(), "probe_stream: a CUDA buffer");
    TORCH_CHECK(group >= 1 && iters >= 1 && grid >= 1 && threads >= 32 && tile_bytes % 16 == 0 &&
                slice_bytes % tile_bytes == 0 && slice_bytes >= tile_bytes, "probe_stream: arguments");
    TORCH_CHECK((int64_t)((grid + group - 1) / group) * slice_bytes <= src.numel() * src.element_size(),
                "probe_stream: buffer size");
    TORCH_CHECK(smem_bytes >= stages * tile_bytes, "probe_stream: shared memory below the ring's");
    const int smem = smem_bytes;
    const auto* p = reinterpret_cast<const uint4*>(src.data_ptr());
    auto stream_ = at::cuda::getCurrentCUDAStream();
    auto run = [&](auto kernel) {
        TORCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) == cudaSuccess,
                    "probe_stream: shared memory size");
        kernel<<<grid, threads, smem, stream_>>>(p, slice_bytes / 16, group, tile_bytes / 16, iters);
    };
    switch (stages) {
        case 2: run(stream_kernel<2>); break;
        case 3: run(stream_kernel<3>); break;
        case 4: run(stream_kernel<4>); break;
        case 8: run(stream_kernel<8>); break;
        default: TORCH_CHECK(false, "probe_stream: stages 2, 3, 4 or 8");
    }
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "probe_stream: ", cudaGetErrorString(e));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("stream", &stream, "blocks stream tiles of their slice into shared memory with cp.async.cg, S stages");
}
#endif
