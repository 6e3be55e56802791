// Cold-start probe: what the first global loads of a launch cost after the timing's L2 flush. Built as its own
// extension module by research/scripts/probe_cold.py.
//
// touch_kernel: block b sums its slice of `src` (bytes_per_block, 16-byte loads, each thread a strided part of it)
// and writes one float. Block b's slice starts at b * stride_bytes, so a stride of 2 MiB puts every block in its
// own large page (an address translation of its own) and a stride equal to the slice packs them. empty_kernel:
// a launch with nothing to do, the baseline that the launch cost is. Both take a dynamic shared-memory size they
// never touch: whether a launch that needs a large shared-memory carveout costs more than one that needs none.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void empty_kernel() {}

__global__ void touch_kernel(const char* __restrict__ src, long long stride_bytes, int vec_per_block,
                             float* __restrict__ dst) {
    const int4* p = reinterpret_cast<const int4*>(src + blockIdx.x * stride_bytes);
    int acc = 0;
    for (int i = threadIdx.x; i < vec_per_block; i += blockDim.x) {
        const int4 v = p[i];
        acc += v.x ^ v.y ^ v.z ^ v.w;
    }
    __shared__ int red[32];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) s += red[w];
        dst[blockIdx.x] = static_cast<float>(s);
    }
}

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static void check(const char* what) {
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e));
}

static void empty(int smem_bytes) {
    cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    empty_kernel<<<1, 32, smem_bytes, at::cuda::getCurrentCUDAStream()>>>();
    check("probe_cold empty");
}

// src: a CUDA byte buffer holding grid slices of bytes_per_block at stride_bytes; dst: float[grid]
static void touch(torch::Tensor src, torch::Tensor dst, int grid, long long stride_bytes, int bytes_per_block,
                  int smem_bytes) {
    TORCH_CHECK(src.is_cuda() && dst.is_cuda(), "probe_cold touch: CUDA tensors");
    TORCH_CHECK(bytes_per_block % 16 == 0 && stride_bytes % 16 == 0, "probe_cold touch: 16-byte multiples");
    TORCH_CHECK((grid - 1) * stride_bytes + bytes_per_block <= src.numel() * src.element_size(),
                "probe_cold touch: source too small");
    TORCH_CHECK(dst.numel() >= grid, "probe_cold touch: destination too small");
    cudaFuncSetAttribute(touch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    touch_kernel<<<grid, 128, smem_bytes, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const char*>(src.data_ptr()), stride_bytes, bytes_per_block / 16, dst.data_ptr<float>());
    check("probe_cold touch");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("empty", &empty, "an empty launch");
    m.def("touch", &touch, "each block reads its slice of src");
}
#endif
