// mma.sync m16n8k16 probe pieces shared by probe.cu (perfmodel probe) and probe_wgmma.cu (the sm_90a module).
#pragma once

// One mma.sync m16n8k16 with fp32 accumulation: fp16 (DT 0) or bf16 (DT 1) inputs.
template <int DT>
__device__ __forceinline__ void mma_m16n8k16(float (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    if (DT == 0)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Each warp issues CH independent accumulator chains per iteration. One block of W warps per SM; cycles of the
// whole block (clock64). With CH = 1 and one warp, cycles / iters is the instruction's dependent latency; with
// CH = 8 and 4+ warps, the SM's rate. Operands: fixed bit patterns, or with ``src`` six random words per thread
// (thread i of the grid reads src[6i .. 6i+5]).
template <int DT, int CH>
__global__ void probe_mma_kernel(const unsigned* src, long long* cycles, float* sink, int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned t = threadIdx.x;
    unsigned a[4], b[2];
    if (src != nullptr) {
        const unsigned* g = src + ((size_t)blockIdx.x * blockDim.x + t) * 6;
        for (int i = 0; i < 4; ++i) a[i] = g[i];
        for (int i = 0; i < 2; ++i) b[i] = g[4 + i];
    } else {
        for (int i = 0; i < 4; ++i) a[i] = (DT == 0 ? 0x2c003000u : 0x3c203c10u) ^ ((t * 2654435761u + i) & 0x00ff00ffu);
        for (int i = 0; i < 2; ++i) b[i] = (DT == 0 ? 0x2e002f00u : 0x3c303c40u) ^ ((t * 40503u + 7 * i) & 0x00ff00ffu);
    }
    float acc[CH][4];
#pragma unroll
    for (int c = 0; c < CH; ++c)
        for (int i = 0; i < 4; ++i) acc[c][i] = 0.f;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < CH; ++c) mma_m16n8k16<DT>(acc[c], a, b);
    }
    __syncthreads();
    const long long t1 = clock64();
    if (t == 0) cycles[blockIdx.x] = t1 - t0;
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CH; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    if (s == 12345.f) sink[0] = s;
#endif
}
