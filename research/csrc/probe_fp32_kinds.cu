// Which FP32-class instructions share the FMA pipe's time with mma.sync (the FP32-kinds probe): the pipe-mix probe
// (perfmodel/measure/probe_csrc/probe.cu, probe_mix_kernel) found mma.sync and FFMA add; FlashAttention-2's softmax
// also runs FMNMX and FSETP (the ALU pipe) and, around each MUFU.EX2, the two FMULs of exp2f's range check, which
// run predicated off for every score attention produces. Each warp runs, per loop iteration, the asked number of
// each kind in eight independent chains:
//   mma    mma.sync m16n8k16 (fp16 in, fp32 accumulate)
//   ffma   fma.rn.f32                           FFMA, FMA pipe
//   off    @p mul.f32 with p false at run time  FMUL predicated off (exp2f's range-check scaling)
//   on     @p mul.f32 with p true               the same FMUL predicated on
//   fmnmx  max.f32                              FMNMX, ALU pipe
//   ex2    ex2.approx.ftz.f32                   MUFU.EX2 alone
//   ex2f   ex2.approx.f32                       exp2f without ftz: FSETP, @!P FMUL, MUFU.EX2, @!P FMUL
// One block of W warps per SM; cycles of the whole block (clock64). Built by research/scripts/probe_fp32_kinds.py.
#include <cuda_runtime.h>

#include "probe_mma.cuh"

struct Mix {
    int mma, ffma, off, on, fmnmx, ex2, ex2f;
};

// eight predicated FMULs sharing one predicate, set from ``flag`` (0: predicated off)
__device__ __forceinline__ void pred_mul8(float (&f)[8], unsigned flag) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %8, 0;\n"
                 "@p mul.f32 %0, %0, 0f3F7FBE77;\n@p mul.f32 %1, %1, 0f3F7FBE77;\n"
                 "@p mul.f32 %2, %2, 0f3F7FBE77;\n@p mul.f32 %3, %3, 0f3F7FBE77;\n"
                 "@p mul.f32 %4, %4, 0f3F7FBE77;\n@p mul.f32 %5, %5, 0f3F7FBE77;\n"
                 "@p mul.f32 %6, %6, 0f3F7FBE77;\n@p mul.f32 %7, %7, 0f3F7FBE77;\n}\n"
                 : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3]), "+f"(f[4]), "+f"(f[5]), "+f"(f[6]), "+f"(f[7])
                 : "r"(flag));
}

__global__ void probe_fp32_kinds_kernel(long long* cycles, float* sink, int iters, Mix m, unsigned flag_off,
                                        unsigned flag_on) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned t = threadIdx.x, lane = t & 31;
    unsigned a[4][4], b[4][2];
    for (int k = 0; k < 4; ++k) {
        for (int i = 0; i < 4; ++i) a[k][i] = 0x2c003000u ^ ((t * 2654435761u + i + 8 * k) & 0x00ff00ffu);
        for (int i = 0; i < 2; ++i) b[k][i] = 0x2e002f00u ^ ((t * 40503u + 7 * i + k) & 0x00ff00ffu);
    }
    float acc[8][4], f[8], g[8], h[8], x[8], e[8], ef[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        for (int i = 0; i < 4; ++i) acc[c][i] = 0.f;
        f[c] = 1.0f + 0.001f * (float)c;
        g[c] = 1.0f + 0.002f * (float)c;
        h[c] = 1.0f + 0.003f * (float)c;
        x[c] = -0.01f * (float)(c + lane);
        e[c] = -0.001f * (float)(c + lane);
        ef[c] = -0.002f * (float)(c + lane);
    }
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
        for (int n = 0; n < m.mma; n += 8) {
#pragma unroll
            for (int c = 0; c < 8; ++c) mma_m16n8k16<0>(acc[c], a[c & 3], b[c & 3]);
        }
        for (int n = 0; n < m.ffma; n += 8) {
#pragma unroll
            for (int c = 0; c < 8; ++c) asm volatile("fma.rn.f32 %0, %0, %1, %2;\n" : "+f"(f[c]) : "f"(0.999f), "f"(0.001f));
        }
        for (int n = 0; n < m.off; n += 8) pred_mul8(g, flag_off);
        for (int n = 0; n < m.on; n += 8) pred_mul8(h, flag_on);
        for (int n = 0; n < m.fmnmx; n += 8) {
#pragma unroll
            for (int c = 0; c < 8; ++c) asm volatile("max.f32 %0, %0, %1;\n" : "+f"(x[c]) : "f"(-0.5f));
        }
        for (int n = 0; n < m.ex2; n += 8) {
#pragma unroll
            for (int c = 0; c < 8; ++c) asm volatile("ex2.approx.ftz.f32 %0, %0;\n" : "+f"(e[c]));
        }
        for (int n = 0; n < m.ex2f; n += 8) {
#pragma unroll
            for (int c = 0; c < 8; ++c) asm volatile("ex2.approx.f32 %0, %0;\n" : "+f"(ef[c]));
        }
    }
    __syncthreads();
    const long long t1 = clock64();
    if (t == 0) cycles[blockIdx.x] = t1 - t0;
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < 8; ++c) s += acc[c][0] + acc[c][3] + f[c] + g[c] + h[c] + x[c] + e[c] + ef[c];
    if (s == 12345.f) sink[0] = s;
#endif
}

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// counts: int list [mma, ffma, off, on, fmnmx, ex2, ex2f], each a multiple of 8
static void run(torch::Tensor cycles, torch::Tensor sink, int warps, int iters, std::vector<int64_t> counts) {
    TORCH_CHECK(cycles.is_cuda() && cycles.scalar_type() == torch::kInt64, "probe_fp32_kinds: int64 CUDA cycles");
    TORCH_CHECK(counts.size() == 7, "probe_fp32_kinds: seven counts");
    for (auto n : counts) TORCH_CHECK(n >= 0 && n % 8 == 0, "probe_fp32_kinds: counts are multiples of 8");
    const Mix m{(int)counts[0], (int)counts[1], (int)counts[2], (int)counts[3], (int)counts[4], (int)counts[5],
                (int)counts[6]};
    probe_fp32_kinds_kernel<<<(unsigned)cycles.numel(), 32 * warps, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<long long*>(cycles.data_ptr<int64_t>()), sink.data_ptr<float>(), iters, m, 0u, 1u);
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "probe_fp32_kinds: ", cudaGetErrorString(e));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, mod) {
    mod.def("run", &run, "one launch of the FP32-kinds mix: one block of `warps` warps per entry of cycles");
}
#endif
