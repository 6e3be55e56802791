// PTX wrappers the tensor-core kernels share (fa2_tc.cu's forward, fa2_tc_bwd.cu's backward): shared-memory
// addresses, cp.async copies, ldmatrix, the m16n8k16 MMA, 16-bit packing, ex2, and the XOR-swizzled tile layout
// with its cp.async tile copy. Inline device functions, so each
// kernel compiles as if it held its own copy.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

namespace fa2tc_ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy through L2 only (.cg); src_bytes = 0 writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// c += a * b for one m16n8k16 tile, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (std::is_same<T, __half>::value) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// Two floats to a packed pair of T, lo in the low half (the lower column).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    uint32_t r;
    if constexpr (std::is_same<T, __half>::value) {
        __half2 h = __floats2half2_rn(lo, hi);
        r = *reinterpret_cast<uint32_t*>(&h);
    } else {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        r = *reinterpret_cast<uint32_t*>(&h);
    }
    return r;
}

__device__ __forceinline__ float ex2(float x) {
    float y;
#ifdef FA2TC_EX2_NOFTZ
    // research build only (research/csrc/fa2_tc_noftz.cu): FlashAttention-2's exponential, without ftz
    asm("ex2.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
#else
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
#endif
    return y;
}


// A score scaled and shifted for ex2: x * sl2 - ms, one FFMA. Research build only (research/csrc/fa2_tc_flashexp.cu):
// FlashAttention-2's FMUL then FADD, as its compiled loop has them.
__device__ __forceinline__ float scale_shift(float x, float sl2, float ms) {
#ifdef FA2TC_SPLIT_FMA
    return __fadd_rn(__fmul_rn(x, sl2), -ms);
#else
    return fmaf(x, sl2, -ms);
#endif
}

// XOR applied to the 16-byte chunk index of row r.
template <int D>
__device__ __forceinline__ int swz(int r) {
    return D >= 64 ? (r & 7) : ((r >> 1) & 3);
}
// Byte offset of 16-byte chunk c of row r in a [rows][D] tile.
template <int D>
__device__ __forceinline__ uint32_t tile_off(int r, int c) {
    return (uint32_t)(r * (D * 2) + ((c ^ swz<D>(r)) << 4));
}

// Byte offset of k16 step c (chunks 2c and 2c+1) for a lane whose step-0 ldmatrix offset is a0 (see the kernel).
__device__ __forceinline__ uint32_t step_off(uint32_t a0, int c) {
    return (a0 ^ (((2 * c) & 7) << 4)) + ((c >> 2) << 7);
}

// cp.async a [ROWS][D] tile whose first row is global row row0; rows >= N are zero-filled (src-size 0: the
// address is formed but not read). Thread tid copies chunk tid % CPR of rows tid / CPR + i * (THREADS / CPR).
template <typename T, int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile(uint32_t s, const T* __restrict__ g, int row0, int N, int tid) {
    constexpr int CPR = D / 8, CH = ROWS * CPR, IT = (CH + THREADS - 1) / THREADS, RSTEP = THREADS / CPR;
    static_assert(THREADS % CPR == 0, "a thread keeps one chunk column");
    const int r0 = tid / CPR, k = tid % CPR;
    const T* src = g + (size_t)(row0 + r0) * D + k * 8;
    const uint32_t dst = s + tile_off<D>(r0, k);
    const int left = N - row0 - r0;
#pragma unroll
    for (int i = 0; i < IT; ++i) {
        if (CH % THREADS == 0 || r0 + i * RSTEP < ROWS) {
            // the swizzle repeats every 8 rows, so with RSTEP % 8 == 0 every row of this thread has r0's XOR
            const uint32_t d = RSTEP % 8 == 0 ? dst + i * RSTEP * (D * 2) : s + tile_off<D>(r0 + i * RSTEP, k);
            cp_async_16(d, src + (size_t)i * RSTEP * D, i * RSTEP < left ? 16 : 0);
        }
    }
}

}  // namespace fa2tc_ptx
