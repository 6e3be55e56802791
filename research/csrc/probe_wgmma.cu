// Hopper warpgroup MMA (wgmma.mma_async) throughput probe: what the tensor pipe reaches when a warpgroup feeds it
// FlashAttention-3's way, on random fp16 data. Built for sm_90a only (wgmma needs the arch-specific target), as its
// own extension module, by research/scripts/probe_wgmma.py; the kernels of perfmodel build for the plain sm_XY target.
//
// One block per SM of W warpgroups (128 threads each). The block copies random data (A: 64 x 64 fp16, B: N x 64
// fp16, both K-major in the 128-byte swizzle layout CUTLASS and FlashAttention-3 use) into shared memory once; then
// each iteration every warpgroup issues four m64nNk16 wgmmas (one 64-wide k block) into its fp32 accumulators,
// commits them as one group and waits until at most one group is in flight, as a pipelined main loop does. SS: A
// and B from shared memory (FA3's Q K^T); RS: A from registers (FA3's P V). Cycles of the whole block (clock64);
// the host times the launch with CUDA events too, so the run gives the per-clock rate and the clock it ran at.
#include <cuda_runtime.h>
#include <cstdint>

#include "probe_mma.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PERFMODEL_WGMMA 1
#endif

#ifdef PERFMODEL_WGMMA

// m64n128k16, fp16 in, fp32 accumulators (64 per thread); A and B from shared memory (SS)
__device__ __forceinline__ void wgmma_ss_128(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(1));
}

// m64n128k16 with A from registers (RS), as FlashAttention-3's P V
__device__ __forceinline__ void wgmma_rs_128(float* d, const uint32_t* a, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

// m64n256k16, fp16 in, fp32 accumulators (128 per thread); A and B from shared memory (SS)
__device__ __forceinline__ void wgmma_ss_256(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(1));
}

// m64n256k16 with A from registers (RS), as FlashAttention-3's P V
__device__ __forceinline__ void wgmma_rs_256(float* d, const uint32_t* a, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading and stride byte
// offsets (16-byte units), 128-byte swizzle (layout type 1). K-major with 128-byte swizzle: the leading offset is
// unused (1), the stride offset is one 8-row x 128-byte swizzle atom (1024 bytes); a k16 step moves 32 bytes.
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
#endif

// KSTEPS wgmmas a group (past the operands' four k16 blocks they are re-used); WAIT: the groups left in flight when
// the warpgroup waits (1: the throughput probe's pipelined loop; 0: the chain probe below waits for each group whole)
template <int N, bool RS, int KSTEPS = 4, int WAIT = 1>
__global__ void __launch_bounds__(384, 1) probe_wgmma_kernel(const uint4* src, long long* cycles, float* sink,
                                                             int iters) {
#ifdef PERFMODEL_WGMMA
    constexpr int A_BYTES = 64 * 128, B_BYTES = N * 128, WORDS = (A_BYTES + B_BYTES) / 16;
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint4* s = reinterpret_cast<uint4*>(smem);
    const uint4* g = src + (size_t)blockIdx.x * WORDS;
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) s[i] = g[i];
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");      // generic-proxy stores -> wgmma reads
    __syncthreads();
    const uint64_t da = smem_desc(smem), db = smem_desc(smem + A_BYTES);
    uint32_t a[4];
    const uint32_t* ga = reinterpret_cast<const uint32_t*>(g) + (threadIdx.x & 127) * 4;
    for (int i = 0; i < 4; ++i) a[i] = ga[i];
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int k = 0; k < KSTEPS; ++k) {
            const int kb = 2 * (k & 3);
            if constexpr (RS) {
                if constexpr (N == 128) wgmma_rs_128(d, a, db + kb);
                else wgmma_rs_256(d, a, db + kb);
            } else {
                if constexpr (N == 128) wgmma_ss_128(d, da + kb, db + kb);
                else wgmma_ss_256(d, da + kb, db + kb);
            }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        if constexpr (WAIT == 0) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        else asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc += d[i];
    if (acc == 12345.f) sink[0] = acc;
#endif
}


// For comparison in the same run: mma.sync m16n8k16 (fp16 in, fp32 accumulators) on the same random data, W warps
// per block, 8 independent accumulator chains per warp: probe_mma_kernel (probe_mma.cuh) with random operands.
// bytes of shared memory a launch needs: the operands, plus room to align them to 1024 bytes
static int wgmma_smem_bytes(int n) { return 64 * 128 + n * 128 + 1024; }


// The chain probe: how long a warpgroup waits on a group of wgmmas it has just issued, as FlashAttention-3-class
// kernels do twice a KV step (Q K^T, then P V, each waited on before the softmax or the next step reads its
// result). Each iteration issues KSTEPS dependent m64n128k16 wgmmas into the same accumulators (SS or RS), commits
// them and waits for all of them (WAIT = 0). Cycles per iteration against KSTEPS give the pipe time per wgmma (the
// slope) and the wait a group adds beyond it (the intercept).
static const char* launch_wgmma_chain(const void* src, long long* cycles, float* sink, int blocks, int warpgroups,
                                      int iters, int ksteps, bool rs, cudaStream_t stream) {
    const dim3 grid(blocks), block(128 * warpgroups);
    const int smem = wgmma_smem_bytes(128);
    const uint4* s = static_cast<const uint4*>(src);
#define PERFMODEL_CHAIN(K)                                                                                         \
    if (ksteps == K && rs) probe_wgmma_kernel<128, true, K, 0><<<grid, block, smem, stream>>>(s, cycles, sink, iters); \
    else if (ksteps == K) probe_wgmma_kernel<128, false, K, 0><<<grid, block, smem, stream>>>(s, cycles, sink, iters);
    PERFMODEL_CHAIN(1) else PERFMODEL_CHAIN(2) else PERFMODEL_CHAIN(4) else PERFMODEL_CHAIN(8)
    else return "probe_wgmma_chain: ksteps must be 1, 2, 4 or 8";
#undef PERFMODEL_CHAIN
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

static const char* launch_wgmma(const void* src, long long* cycles, float* sink, int blocks, int warpgroups,
                                int iters, int n, bool rs, cudaStream_t stream) {
    const dim3 grid(blocks), block(128 * warpgroups);
    const int smem = wgmma_smem_bytes(n);
    const uint4* s = static_cast<const uint4*>(src);
    if (n == 128 && !rs) probe_wgmma_kernel<128, false><<<grid, block, smem, stream>>>(s, cycles, sink, iters);
    else if (n == 128) probe_wgmma_kernel<128, true><<<grid, block, smem, stream>>>(s, cycles, sink, iters);
    else if (n == 256 && !rs) probe_wgmma_kernel<256, false><<<grid, block, smem, stream>>>(s, cycles, sink, iters);
    else if (n == 256) probe_wgmma_kernel<256, true><<<grid, block, smem, stream>>>(s, cycles, sink, iters);
    else return "probe_wgmma: n must be 128 or 256";
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

#ifndef PERFMODEL_NO_TORCH
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// The arguments both wgmma probes take, checked once. src: random fp16 data, at least blocks * (the operands at
// n) bytes; cycles: int64[blocks]; sink: float[1]
static void check_wgmma_args(const char* what, const torch::Tensor& src, const torch::Tensor& cycles, int blocks,
                             int warpgroups, int n) {
    TORCH_CHECK(src.is_cuda() && src.is_contiguous(), what, ": src must be a contiguous CUDA tensor");
    TORCH_CHECK(src.nbytes() >= (size_t)blocks * (64 * 128 + n * 128), what, ": src too small");
    TORCH_CHECK(cycles.numel() >= blocks, what, ": cycles too small");
    TORCH_CHECK(warpgroups >= 1 && warpgroups <= 3, what, ": 1 to 3 warpgroups");
}

static void probe_wgmma(torch::Tensor src, torch::Tensor cycles, torch::Tensor sink, int blocks, int warpgroups,
                        int iters, int n, bool rs) {
    check_wgmma_args("probe_wgmma", src, cycles, blocks, warpgroups, n);
    const char* err = launch_wgmma(src.data_ptr(), (long long*)cycles.data_ptr<int64_t>(), sink.data_ptr<float>(),
                                   blocks, warpgroups, iters, n, rs, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "probe_wgmma launch: ", err ? err : "");
}

// the chain probe: n = 128; ksteps: 1, 2, 4 or 8
static void probe_wgmma_chain(torch::Tensor src, torch::Tensor cycles, torch::Tensor sink, int blocks,
                              int warpgroups, int iters, int ksteps, bool rs) {
    check_wgmma_args("probe_wgmma_chain", src, cycles, blocks, warpgroups, 128);
    const char* err = launch_wgmma_chain(src.data_ptr(), (long long*)cycles.data_ptr<int64_t>(),
                                         sink.data_ptr<float>(), blocks, warpgroups, iters, ksteps, rs,
                                         at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "probe_wgmma_chain launch: ", err ? err : "");
}

// src: random fp16 data, at least blocks * warps * 32 * 24 bytes
static void probe_mma_random(torch::Tensor src, torch::Tensor cycles, torch::Tensor sink, int blocks, int warps,
                             int iters) {
    TORCH_CHECK(src.is_cuda() && src.nbytes() >= (size_t)blocks * warps * 32 * 24, "probe_mma_random: src too small");
    TORCH_CHECK(cycles.numel() >= blocks, "probe_mma_random: cycles too small");
    probe_mma_kernel<0, 8><<<blocks, 32 * warps, 0, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const unsigned*>(src.data_ptr()), (long long*)cycles.data_ptr<int64_t>(), sink.data_ptr<float>(),
        iters);
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "probe_mma_random launch: ", cudaGetErrorString(e));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("probe_wgmma", &probe_wgmma, "wgmma throughput probe (sm_90a)");
    m.def("probe_wgmma_chain", &probe_wgmma_chain, "wgmma group wait probe (sm_90a)");
    m.def("probe_mma_random", &probe_mma_random, "mma.sync throughput on random data");
}
#endif
