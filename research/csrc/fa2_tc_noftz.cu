// fa2_tc with FlashAttention-2's exponential: the same kernel source compiled with FA2TC_EX2_NOFTZ, so that its
// ex2 is ex2.approx.f32 without .ftz. ptxas lowers that to SDPA flash's sequence around each MUFU.EX2: an FSETP
// range check and two FMULs predicated on it (research/notes/known-gaps-log.md, 2026-12-02). Nothing else differs:
// an own-kernel copy of SDPA flash's per-score surplus, timed beside the measured build by
// research/scripts/fa2_tc_noftz.py. Its own extension module; the measured kernels are compiled without the macro.
#define FA2TC_EX2_NOFTZ 1
#include "fa2_tc.cu"

#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// Q, K, V, O: (B, H, N, d) contiguous CUDA tensors of one dtype (fp16 or bf16), as the measured build's forward
static void fa2_tc_noftz_forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, int Br, int Bc,
                                 int warps, bool causal) {
    TORCH_CHECK(Q.is_cuda() && Q.is_contiguous() && Q.dim() == 4, "fa2_tc_noftz: Q must be contiguous 4-D CUDA");
    TORCH_CHECK(K.sizes() == Q.sizes() && V.sizes() == Q.sizes() && O.sizes() == Q.sizes(),
                "fa2_tc_noftz: Q, K, V and O must have one shape");
    TORCH_CHECK(K.is_contiguous() && V.is_contiguous() && O.is_contiguous(), "fa2_tc_noftz: tensors must be contiguous");
    TORCH_CHECK(Q.scalar_type() == torch::kFloat16 || Q.scalar_type() == torch::kBFloat16,
                "fa2_tc_noftz: Q must be float16 or bfloat16");
    const int B = Q.size(0), H = Q.size(1), N = Q.size(2), d = Q.size(3);
    const int dtype = Q.scalar_type() == torch::kBFloat16 ? 1 : 0;
    fa2_tc_launch_ex(Q.data_ptr(), K.data_ptr(), V.data_ptr(), O.data_ptr(), B, H, N, d, Br, Bc, warps, dtype,
                     causal ? 1 : 0, 0, at::cuda::getCurrentCUDAStream());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("fa2_tc_noftz_forward", &fa2_tc_noftz_forward, "fa2_tc forward with ex2.approx.f32 (no ftz)");
}
