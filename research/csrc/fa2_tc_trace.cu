// fa2_tc with per-block tracing: the same kernel source, compiled with FA2TC_TRACE so that every block records its
// SM and its start and end times (fa2_tc.cu, "Trace builds only"). Its own extension module, built by
// research/scripts/trace_fa2_tc.py; the measured kernels (binding.cpp's module) are compiled without the macro, to the
// same PTX as before it existed.
#define FA2TC_TRACE 1
#include "fa2_tc.cu"

#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// Q, K, V, O: (B, H, N, d) contiguous CUDA tensors of one dtype (fp16 or bf16); trace: int64[TRACE_WORDS * blocks]
// (3, or 8 in a phase build: fa2_tc.cu, "Trace builds only");
// extra_smem: unused dynamic shared memory asked for beyond the tiles', so that fewer blocks fit an SM (this build's
// registers differ from the measured build's: the fairness traces force the measured build's blocks per SM)
static void fa2_tc_traced(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, int Br, int Bc,
                          int warps, bool causal, torch::Tensor trace, int64_t extra_smem) {
    TORCH_CHECK(Q.is_cuda() && Q.is_contiguous() && Q.dim() == 4, "fa2_tc_traced: Q must be contiguous 4-D CUDA");
    const int B = Q.size(0), H = Q.size(1), N = Q.size(2), d = Q.size(3);
    const long blocks = (long)((N + Br - 1) / Br) * H * B;
    TORCH_CHECK(trace.numel() >= fa2tc::TRACE_WORDS * blocks && trace.scalar_type() == torch::kInt64,
                "fa2_tc_traced: trace too small");
    unsigned long long* p = reinterpret_cast<unsigned long long*>(trace.data_ptr<int64_t>());
    fa2_tc_check(cudaMemcpyToSymbol(fa2tc::trace_buf, &p, sizeof(p)), "cudaMemcpyToSymbol(trace_buf)");
    const int dtype = Q.scalar_type() == torch::kBFloat16 ? 1 : 0;
    fa2_tc_launch_ex(Q.data_ptr(), K.data_ptr(), V.data_ptr(), O.data_ptr(), B, H, N, d, Br, Bc, warps, dtype,
                     causal ? 1 : 0, (size_t)extra_smem, at::cuda::getCurrentCUDAStream());
}

// the launch alone, recording into the trace buffer fa2_tc_traced last set: what events around it time is the traced
// kernel, without the host's copy of the pointer
static void fa2_tc_traced_again(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, int Br, int Bc,
                                int warps, bool causal, int64_t extra_smem) {
    const int B = Q.size(0), H = Q.size(1), N = Q.size(2), d = Q.size(3);
    const int dtype = Q.scalar_type() == torch::kBFloat16 ? 1 : 0;
    fa2_tc_launch_ex(Q.data_ptr(), K.data_ptr(), V.data_ptr(), O.data_ptr(), B, H, N, d, Br, Bc, warps, dtype,
                     causal ? 1 : 0, (size_t)extra_smem, at::cuda::getCurrentCUDAStream());
}

// blocks of this build's instance that fit one SM with extra_smem unused bytes of dynamic shared memory each
static int fa2_tc_traced_blocks_per_sm(int d, int Br, int Bc, int warps, int dtype, int64_t extra_smem) {
    return fa2_tc_max_blocks_per_sm(d, Br, Bc, warps, dtype, (size_t)extra_smem);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.attr("trace_words") = fa2tc::TRACE_WORDS;
    m.def("fa2_tc_traced", &fa2_tc_traced, "fa2_tc forward, recording each block's SM, start and end");
    m.def("fa2_tc_traced_again", &fa2_tc_traced_again, "fa2_tc_traced's launch alone, into the buffer it last set");
    m.def("blocks_per_sm", &fa2_tc_traced_blocks_per_sm, "blocks per SM of this build's instance, with extra_smem");
}
