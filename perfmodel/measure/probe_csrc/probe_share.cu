// Shared re-read probe: how much of the L2 a re-read line takes when the blocks reading it sit on many SMs, or on
// SMs of one part of the GPU. Built as its own extension module by research/scripts/probe_l2_share.py.
//
// share_kernel: block b walks slice b / group of `buf` (slice4 float4s, 16-byte loads through L2 only, ld.global.cg)
// `passes` times, so `group` consecutive blocks read the same lines at about the same time; a block whose SM is
// not marked in `active` (one int per SM id) reads nothing. Every block records its SM id. The DRAM bytes Nsight
// Compute counts, less the first touch, are the re-reads that missed.
#include <cuda_runtime.h>
#include <cstdint>

#include "sm_timer.cuh"

__global__ void share_kernel(const float4* __restrict__ buf, long long slice4, int group, int passes,
                             const int* __restrict__ active, float* sink, int* smid) {
    const unsigned sm = sm_id();
    if (threadIdx.x == 0) smid[blockIdx.x] = (int)sm;
    if (!active[sm]) return;
    const float4* mine = buf + (long long)(blockIdx.x / group) * slice4;
    float acc = 0.f;
    for (int p = 0; p < passes; ++p) {
        for (long long i = threadIdx.x; i < slice4; i += blockDim.x) {
            const float4 v = __ldcg(mine + i);
            acc += v.x + v.y + v.z + v.w;
        }
    }
    if (acc == 12345.f) sink[0] = acc;
}

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// buf: float32 CUDA buffer of at least ceil(grid / group) slices of slice_floats; active: int32[>= SM count];
// smid: int32[grid]; sink: float32[1]
static void share(torch::Tensor buf, int64_t slice_floats, int group, int passes, torch::Tensor active,
                  torch::Tensor sink, torch::Tensor smid, int grid) {
    TORCH_CHECK(buf.is_cuda() && active.is_cuda() && sink.is_cuda() && smid.is_cuda(), "probe_share: CUDA tensors");
    TORCH_CHECK(group >= 1 && passes >= 1 && grid >= 1 && slice_floats % 4 == 0, "probe_share: arguments");
    TORCH_CHECK((int64_t)((grid + group - 1) / group) * slice_floats <= buf.numel(), "probe_share: buffer size");
    TORCH_CHECK(smid.numel() >= grid, "probe_share: smid size");
    share_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const float4*>(buf.data_ptr<float>()), slice_floats / 4, group, passes,
        active.data_ptr<int>(), sink.data_ptr<float>(), smid.data_ptr<int>());
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "probe_share: ", cudaGetErrorString(e));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("share", &share, "group consecutive blocks re-read one slice; blocks on unmarked SMs read nothing");
}
#endif
