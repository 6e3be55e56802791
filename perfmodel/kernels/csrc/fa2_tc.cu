// fa2_tc: tensor-core FlashAttention-2 forward, fp16 or bf16 in, fp32 accumulation, O written in the input dtype.
// Plain CUDA C++ with inline PTX (mma.sync m16n8k16, ldmatrix, cp.async); no CUTLASS/CuTe, no torch headers.
// Builds for sm_80, sm_86 and sm_90 (mma.sync path; no wgmma).
//
// Problem: Q, K, V, O contiguous (B, H, N, d), one dtype; scale 1/sqrt(d); causal: query i sees keys j <= i.
// Template parameters: dtype T, head dim D, tile rows BR (queries per block), BC (keys per KV tile), WARPS.
// Run-time arguments: N, causal. One thread block per (Q tile, head): grid (ceil(N/BR), H, B); Q tiles are
// visited in reverse (blockIdx.x = 0 takes the LAST Q tile), so that under causal masking the longest blocks
// start first. THREADS = 32*WARPS. Warps split along M only (FA2): warp w owns query rows
// [w*RW, (w+1)*RW) of the tile, RW = BR/WARPS = 16*MT (MT = 1 or 2 m16 tiles); every warp reads the whole K/V tile.
//
// Shared memory (dynamic, (BR + 2*BC)*D*2 bytes): Q tile [BR][D], K tile [BC][D], V tile [BC][D] (single-buffered
// K and V, as FA2). Rows are D*2 bytes, unpadded, XOR-swizzled in 16-byte chunks: chunk c of row r is stored at
// chunk c ^ (r & 7) (D >= 64, FA2's Swizzle<3,3,3> on 128-byte groups) or c ^ ((r >> 1) & 3) (D = 32, 64-byte
// rows). Every ldmatrix phase (8 row addresses) and every cp.async/staging phase then hits 8 distinct 16-byte
// bank groups: conflict-free.
//
// Notation: NS = BC/8 (S n8 tiles), KQ = D/16 (k16 steps of QK^T), NO = D/8 (O n8 tiles), KP = BC/16 (k16 steps
// of PV). QREG = (MT == 1 && D <= 128): Q fragments kept in registers (KQ ldmatrix.x4 once per warp); otherwise
// Q is re-read from shared memory at every k-step (FA2's default, Is_Q_in_regs = false).
//
// Per block:
//   prologue: cp.async Q tile (BR*D/8 16-byte copies) and K tile nt-1 (BC*D/8 copies); commit;
//             [QREG: wait_group 0; __syncthreads; KQ ldmatrix.x4 per warp into registers]
//   nt = ceil(kv_end/BC) KV tiles, kv_end = causal ? min(N, q0+BR) : N, visited from the LAST to the first (FA2
//   order: the masked tiles come first). Per KV tile jt (k0 = jt*BC):
//     1. cp.async.wait_group 0; __syncthreads      (K[jt] landed; every warp is done with V[jt+1])
//     2. cp.async V[jt]: BC*D/8 16-byte copies per block (BC*D/8/THREADS per thread); commit
//                                                   -> V's load overlaps QK^T and the softmax
//     3. S = Q K^T, per warp: for ks < KQ { QREG ? - : MT ldmatrix.x4 (Q);
//                                          for np < NS/2 { 1 ldmatrix.x4 (K, two n8 tiles); 2*MT mma } }
//        = MT*NS*KQ mma, KQ*NS/2 ldmatrix.x4 (K), (QREG ? 0 : MT*KQ) ldmatrix.x4 (Q)
//     4. mask (only on tiles with k0+BC > N, or causal and k0+BC-1 > the warp's first row; warp-uniform branch):
//        s = -inf where key >= N or (causal and key > query); per thread 4*MT*NS compare/selects
//     5. online softmax in registers, per thread (2*MT rows, 2*NS values a row):
//        row max: 4*MT*NS FMNMX + 2 shfl.xor (1, 2) and 2 FMNMX per row = 4*MT shuffles, 4*MT FMNMX;
//        m_new, ms = m_new*log2(e)/sqrt(d) (0 if m_new = -inf); alpha = ex2(m_old*sl2 - ms): 2*MT ex2;
//        p = ex2(fma(s, sl2, -ms)): 4*MT*NS FFMA + 4*MT*NS MUFU.EX2; row sums kept per thread (4*MT*NS FADD,
//        quad-reduced once at the end); O *= alpha: 4*MT*NO FMUL; l = l*alpha + rowsum.
//     6. cp.async.wait_group 0; __syncthreads      (V[jt] landed; every warp is done with K[jt])
//     7. if jt > 0: cp.async K[jt-1] (BC*D/8 copies per block); commit   -> the next K's load overlaps PV
//     8. O += P V, per warp: for kk < KP { pack P to T: 4*MT cvt.f16x2/bf16x2 per k-step (2*MT*NS per tile);
//                                         for dp < D/16 { 1 ldmatrix.x4.trans (V, two n8 tiles); 2*MT mma } }
//        = MT*NO*KP mma, KP*D/16 ldmatrix.x4.trans
//   Per warp per KV tile in total: MT*BC*D/64 mma.m16n8k16 (MT*BC*D/128 for QK^T and as many for PV),
//   BC*D/256 ldmatrix.x4 (K) + BC*D/256 ldmatrix.x4.trans (V) + (QREG ? 0 : MT*D/16) ldmatrix.x4 (Q),
//   2 __syncthreads, 2 cp.async.wait_group, 1 or 2 commit_group, 4*MT shuffles, 4*MT*NS + 2*MT ex2.
//   Checked against the sm_90 SASS (one unrolled loop body), e.g. d=128 128x64x4: 256 HMMA, 48 LDSM (32 K + 16 Q),
//   32 LDSM.MT (V), 68 MUFU.EX2, 72 FMNMX, 8 SHFL in the loop (+8 in the epilogue), 32 + 64 (epilogue) F2FP.
//   Per block per KV tile: 2*BC*D/8 cp.async 16-byte copies (K and V), i.e. 4*BC*D bytes from L2/DRAM.
//   epilogue: l quad-summed (2 shuffles a row), 1/l; O*(1/l) packed to T and stored 4 bytes at a time into the
//   warp's own rows of the Q tile (same swizzle; __syncwarp), then copied out with 16-byte loads and 16-byte
//   global stores, rows >= N skipped (RW*D/8/32 per lane).
//
// Bounds: Q/K/V rows >= N are zero-filled by cp.async (src-size 0), never read from global memory; keys >= N get
// -inf scores (so P = 0 and the zero V rows add nothing); query rows >= N are computed and not written. Rows fully
// masked within one tile (causal, Br != Bc) keep m = -inf and contribute nothing (the -inf guard above).
// The exponential is ex2.approx.ftz.f32 (one MUFU.EX2), the scale folded with log2(e) into sl2.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "sm_timer.cuh"

namespace fa2tc {

#ifdef FA2TC_TRACE
// Trace builds only (research/scripts/trace_fa2_tc.py, research/csrc/fa2_tc_trace.cu): each block writes its SM and its start and end
// on the global timer (ns) to trace[TRACE_WORDS * linear block id + {0, 1, 2}]. The measured kernels are built
// without it. Phase builds (FA2TC_PHASES, research/csrc/fa2_tc_phase.cu) add, for warp 0 of each block, the SM cycles
// (clock64) its KV loop spent in each phase summed over its tiles: {3} waiting for K (the copy's wait and the
// barrier), {4} QK^T and the softmax (to the row sums' last value), {5} waiting for V, {6} PV (to its last MMA's
// result), and {7} the warp's cycles from its start to the block's end.
#ifdef FA2TC_PHASES
constexpr int TRACE_WORDS = 8;
#else
constexpr int TRACE_WORDS = 3;
#endif
__device__ unsigned long long* trace_buf;
#endif
#ifdef FA2TC_PHASES
// The SM's cycle counter, read once ``after`` holds its value: the read waits on the work that produced it
__device__ __forceinline__ unsigned long long clock_after(float after) {
    unsigned long long t;
    asm volatile("{\n .reg .pred p;\n setp.eq.f32 p, %1, 0f7FFFFFFF;\n mov.u64 %0, %%clock64;\n}\n"
                 : "=l"(t) : "f"(after) : "memory");
    return t;
}
#define FA2TC_PHASE(slot, after)                     \
    do {                                             \
        const unsigned long long now = clock_after(after); \
        phase[slot] += now - phase_t;                \
        phase_t = now;                               \
    } while (0)
#else
#define FA2TC_PHASE(slot, after) \
    do {                         \
    } while (0)
#endif

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
// Two n8 tiles of accumulators (columns col and col + 1) for every m16 tile of the warp, from one ldmatrix.x4 of B.
template <typename T, int MT, int NC>
__device__ __forceinline__ void mma_n16(float (&acc)[MT][NC][4], int col, const uint32_t (&a)[MT][4],
                                        const uint32_t (&f)[4]) {
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
        mma16816<T>(acc[mi][col], a[mi], f[0], f[1]);
        mma16816<T>(acc[mi][col + 1], a[mi], f[2], f[3]);
    }
}

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
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
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

template <typename T, int D, int BR, int BC, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    fa2_tc_kernel(const void* __restrict__ Qv, const void* __restrict__ Kv, const void* __restrict__ Vv,
                  void* __restrict__ Ov, int N, int causal, float sl2) {
    constexpr int THREADS = WARPS * 32, RW = BR / WARPS, MT = RW / 16;
    constexpr int NS = BC / 8, KQ = D / 16, NO = D / 8, KP = BC / 16, ROWB = D * 2, DP = D / 16;
    constexpr bool QREG = (MT == 1) && (D <= 128);
    static_assert(RW % 16 == 0 && (MT == 1 || MT == 2), "each warp owns 16 or 32 query rows");
    static_assert(BC % 16 == 0 && D % 32 == 0, "BC must be a multiple of 16 and D of 32");

    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sQ = smem_addr(smem), sK = sQ + BR * ROWB, sV = sK + BC * ROWB;

#ifdef FA2TC_TRACE
    const unsigned long long trace_t0 = global_ns();
#endif
#ifdef FA2TC_PHASES
    const unsigned long long phase_start = clock_after(0.f);
    unsigned long long phase[4] = {0, 0, 0, 0}, phase_t = phase_start;
#endif
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * BR;
    const size_t head = ((size_t)blockIdx.z * gridDim.y + blockIdx.y) * (size_t)N * D;
    const T* __restrict__ Q = static_cast<const T*>(Qv) + head;
    const T* __restrict__ K = static_cast<const T*>(Kv) + head;
    const T* __restrict__ V = static_cast<const T*>(Vv) + head;
    T* __restrict__ O = static_cast<T*>(Ov) + head;

    const int kv_end = causal ? min(N, q0 + BR) : N;
    const int nt = (kv_end + BC - 1) / BC;
    const int wrow0 = q0 + warp * RW;  // first query row of this warp

    // Per-lane ldmatrix row addresses, as byte offsets within a tile. A lane's row has a fixed (row & 7) (all
    // other row terms are multiples of 8), so chunk (2*s + hi) of it sits at offset a0 ^ ((2*s & 7) << 4), plus
    // 128 bytes for each 8 chunks: one register per operand, the XOR and the adds are immediates.
    //   Q  (A, x4):       row warp*RW + mi*16 + (lane & 15),                hi = lane >> 4
    //   K  (B, x4):       row np*16 + (lane & 7) + ((lane >> 4) << 3),       hi = (lane >> 3) & 1
    //   V  (B, x4.trans): row kk*16 + (lane & 7) + (((lane >> 3) & 1) << 3), hi = lane >> 4
    const int sw = D >= 64 ? (lane & 7) : ((lane >> 1) & 3);
    const uint32_t qa0 = (warp * RW + (lane & 15)) * ROWB + (((lane >> 4) ^ sw) << 4);
    const uint32_t ka0 = ((lane & 7) + ((lane >> 4) << 3)) * ROWB + ((((lane >> 3) & 1) ^ sw) << 4);
    const uint32_t va0 = ((lane & 7) + (((lane >> 3) & 1) << 3)) * ROWB + (((lane >> 4) ^ sw) << 4);
    float o[MT][NO][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
        for (int n = 0; n < NO; ++n) o[mi][n][0] = o[mi][n][1] = o[mi][n][2] = o[mi][n][3] = 0.f;
        m[mi][0] = m[mi][1] = -INFINITY;
        l[mi][0] = l[mi][1] = 0.f;
    }

    load_tile<T, BR, D, THREADS>(sQ, Q, q0, N, tid);
    load_tile<T, BC, D, THREADS>(sK, K, (nt - 1) * BC, N, tid);
    cp_async_commit();

    uint32_t qr[QREG ? KQ : 1][4];
    if constexpr (QREG) {
        cp_async_wait_all();
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < KQ; ++ks) ldsm_x4(qr[ks], sQ + step_off(qa0, ks));
    }

    for (int jt = nt - 1; jt >= 0; --jt) {
        const int k0 = jt * BC;
#ifdef FA2TC_PHASES
        phase_t = clock_after(0.f);
#endif
        cp_async_wait_all();
        __syncthreads();
        FA2TC_PHASE(0, 0.f);
        load_tile<T, BC, D, THREADS>(sV, V, k0, N, tid);
        cp_async_commit();

        // S = Q K^T (raw scores, fp32)
        float s[MT][NS][4];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
            for (int j = 0; j < NS; ++j) s[mi][j][0] = s[mi][j][1] = s[mi][j][2] = s[mi][j][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KQ; ++ks) {
            uint32_t qa[MT][4];
            if constexpr (QREG) {
#pragma unroll
                for (int e = 0; e < 4; ++e) qa[0][e] = qr[ks][e];
            } else {
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) ldsm_x4(qa[mi], sQ + step_off(qa0, ks) + mi * 16 * ROWB);
            }
#pragma unroll
            for (int np = 0; np < NS / 2; ++np) {
                uint32_t kf[4];
                ldsm_x4(kf, sK + step_off(ka0, ks) + np * 16 * ROWB);
                mma_n16<T>(s, 2 * np, qa, kf);
            }
        }

        // mask keys >= N and, under causal, keys after the query
        if (k0 + BC > N || (causal && k0 + BC - 1 > wrow0)) {
#pragma unroll
            for (int mi = 0; mi < MT; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    // last visible key of this row, relative to this thread's first column in the tile
                    const int row = wrow0 + mi * 16 + (lane >> 2) + 8 * h;
                    const int lim = (causal ? min(N - 1, row) : N - 1) - (k0 + 2 * (lane & 3));
#pragma unroll
                    for (int j = 0; j < NS; ++j)
#pragma unroll
                        for (int e = 0; e < 2; ++e)
                            if (8 * j + e > lim) s[mi][j][2 * h + e] = -INFINITY;
                }
        }

        // online softmax; P overwrites S
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mx = m[mi][h];
#pragma unroll
                for (int j = 0; j < NS; ++j) mx = fmaxf(mx, fmaxf(s[mi][j][2 * h], s[mi][j][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float ms = mx == -INFINITY ? 0.f : mx * sl2;
                const float alpha = ex2(fmaf(m[mi][h], sl2, -ms));
                m[mi][h] = mx;
                float rs = 0.f;
#pragma unroll
                for (int j = 0; j < NS; ++j) {
                    s[mi][j][2 * h] = ex2(fmaf(s[mi][j][2 * h], sl2, -ms));
                    s[mi][j][2 * h + 1] = ex2(fmaf(s[mi][j][2 * h + 1], sl2, -ms));
                    rs += s[mi][j][2 * h] + s[mi][j][2 * h + 1];
                }
                l[mi][h] = l[mi][h] * alpha + rs;
#pragma unroll
                for (int n = 0; n < NO; ++n) {
                    o[mi][n][2 * h] *= alpha;
                    o[mi][n][2 * h + 1] *= alpha;
                }
            }

        FA2TC_PHASE(1, l[MT - 1][1]);
        cp_async_wait_all();
        __syncthreads();
        FA2TC_PHASE(2, 0.f);
        if (jt > 0) {
            load_tile<T, BC, D, THREADS>(sK, K, k0 - BC, N, tid);
            cp_async_commit();
        }

        // O += P V
#pragma unroll
        for (int kk = 0; kk < KP; ++kk) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                pa[mi][0] = pack2<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
                pa[mi][1] = pack2<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
                pa[mi][2] = pack2<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
                pa[mi][3] = pack2<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < DP; ++dp) {
                uint32_t vf[4];
                ldsm_x4_t(vf, sV + step_off(va0, dp) + kk * 16 * ROWB);
                mma_n16<T>(o, 2 * dp, pa, vf);
            }
        }
        FA2TC_PHASE(3, o[MT - 1][NO - 1][3]);
    }

    // Epilogue: O / l, staged through this warp's own rows of the Q tile (only this warp ever read them, and
    // its last read came before the loop's last __syncthreads), then 16-byte coalesced stores.
    __syncwarp();
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float lt = l[mi][h];
            lt += __shfl_xor_sync(0xffffffffu, lt, 1);
            lt += __shfl_xor_sync(0xffffffffu, lt, 2);
            const float inv = lt > 0.f ? __frcp_rn(lt) : 0.f;
            const int r = warp * RW + mi * 16 + g + 8 * h;
#pragma unroll
            for (int n = 0; n < NO; ++n)
                *reinterpret_cast<uint32_t*>(smem + tile_off<D>(r, n) + 4 * t) =
                    pack2<T>(o[mi][n][2 * h] * inv, o[mi][n][2 * h + 1] * inv);
        }
    __syncwarp();
    constexpr int CPR = D / 8;
#pragma unroll
    for (int i = 0; i < RW * CPR / 32; ++i) {
        const int c = lane + 32 * i;
        const int r = c / CPR, k = c % CPR;
        const int gr = wrow0 + r;
        if (gr < N)
            *reinterpret_cast<uint4*>(O + (size_t)gr * D + k * 8) =
                *reinterpret_cast<const uint4*>(smem + tile_off<D>(warp * RW + r, k));
    }
#ifdef FA2TC_TRACE
    __syncthreads();
    if (tid == 0) {
        const unsigned s = sm_id();
        unsigned long long* t =
            trace_buf + TRACE_WORDS * (blockIdx.x + (size_t)gridDim.x * (blockIdx.y + (size_t)gridDim.y * blockIdx.z));
        t[0] = s;
        t[1] = trace_t0;
        t[2] = global_ns();
#ifdef FA2TC_PHASES
        for (int i = 0; i < 4; ++i) t[3 + i] = phase[i];
        t[7] = clock_after(0.f) - phase_start;
#endif
    }
#endif
}

}  // namespace fa2tc

using Fa2TcKernel = void (*)(const void*, const void*, const void*, void*, int, int, float);

struct Fa2TcInstance {
    int d, br, bc, warps;
    Fa2TcKernel fn[2];  // [0] fp16, [1] bf16
};

#define FA2TC_INST(D, BR, BC, W)                                                           \
    {                                                                                      \
        D, BR, BC, W, {                                                                    \
            fa2tc::fa2_tc_kernel<__half, D, BR, BC, W>, fa2tc::fa2_tc_kernel<__nv_bfloat16, D, BR, BC, W> \
        }                                                                                  \
    }

// The compiled (d, Br, Bc, warps) instances. FA2's own choices on sm80/sm90: d=64 128x128/4, d=128 128x64/4,
// d=256 64x64/4 (H100). sm_90 (nvcc 13.0): all spill-free except d=128 128x64x4 (255 registers, 24-byte stack
// frame, 44/32 bytes of spill stores/loads: mostly three row-sum partials, one STL and one LDL each per KV tile);
// sm_80/sm_86 also spill 44 bytes in d=64 64x128x4. Registers, smem and blocks/SM of each: fa2_tc_attributes /
// fa2_tc_max_blocks_per_sm, or research/data/benchmarks/fa2_tc_vs_sdpa.unclocked.json ("instances").
static const Fa2TcInstance kFa2TcInstances[] = {
    FA2TC_INST(32, 128, 128, 4), FA2TC_INST(32, 128, 64, 4),  FA2TC_INST(32, 64, 64, 4),
    FA2TC_INST(32, 128, 64, 8),

    FA2TC_INST(64, 128, 128, 4), FA2TC_INST(64, 128, 64, 4),  FA2TC_INST(64, 128, 32, 4),
    FA2TC_INST(64, 64, 64, 4),   FA2TC_INST(64, 64, 128, 4),  FA2TC_INST(64, 128, 64, 8),
    FA2TC_INST(64, 128, 128, 8),

    FA2TC_INST(128, 128, 64, 4), FA2TC_INST(128, 128, 32, 4), FA2TC_INST(128, 64, 64, 4),
    FA2TC_INST(128, 64, 128, 4), FA2TC_INST(128, 64, 32, 4),  FA2TC_INST(128, 128, 64, 8),
    FA2TC_INST(128, 128, 128, 8),

    FA2TC_INST(256, 64, 64, 4),  FA2TC_INST(256, 64, 32, 4),  FA2TC_INST(256, 128, 64, 8),
};

static void fa2_tc_check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("fa2_tc: ") + what + ": " + cudaGetErrorString(e));
}

static const Fa2TcInstance& fa2_tc_find(int d, int Br, int Bc, int warps) {
    for (const auto& in : kFa2TcInstances)
        if (in.d == d && in.br == Br && in.bc == Bc && in.warps == warps) return in;
    throw std::runtime_error("fa2_tc: no compiled instance (d=" + std::to_string(d) + ", Br=" + std::to_string(Br) +
                             ", Bc=" + std::to_string(Bc) + ", warps=" + std::to_string(warps) +
                             "); fa2_tc_instances() lists them");
}

static Fa2TcKernel fa2_tc_kernel_for(const Fa2TcInstance& in, int dtype) {
    if (dtype != 0 && dtype != 1)
        throw std::runtime_error("fa2_tc: dtype must be 0 (fp16) or 1 (bf16), got " + std::to_string(dtype));
    return in.fn[dtype];
}

std::vector<std::array<int, 4>> fa2_tc_instances() {
    std::vector<std::array<int, 4>> v;
    for (const auto& in : kFa2TcInstances) v.push_back({in.d, in.br, in.bc, in.warps});
    return v;
}

size_t fa2_tc_smem_bytes(int d, int Br, int Bc, int warps) {
    const auto& in = fa2_tc_find(d, Br, Bc, warps);
    return (size_t)(in.br + 2 * in.bc) * in.d * 2;
}

static void fa2_tc_set_smem(Fa2TcKernel f, size_t smem) {
    if (smem > 48 * 1024)
        fa2_tc_check(cudaFuncSetAttribute((const void*)f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                     "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

// extra_smem: dynamic shared memory asked for beyond the tiles' and never touched, so that fewer blocks fit an SM
// (research/scripts/probe_coresident.py times one tile at one, two or four blocks a SM in the same grid)
void fa2_tc_launch_ex(const void* Q, const void* K, const void* V, void* O, int B, int H, int N, int d, int Br,
                      int Bc, int warps, int dtype, int causal, size_t extra_smem, cudaStream_t stream) {
    const auto& in = fa2_tc_find(d, Br, Bc, warps);
    const Fa2TcKernel f = fa2_tc_kernel_for(in, dtype);
    if (B < 1 || H < 1 || N < 0)
        throw std::runtime_error("fa2_tc: need B >= 1, H >= 1, N >= 0 (got B=" + std::to_string(B) + ", H=" +
                                 std::to_string(H) + ", N=" + std::to_string(N) + ")");
    if (H > 65535 || B > 65535) throw std::runtime_error("fa2_tc: B and H must be <= 65535 (grid y and z)");
    if (N == 0) return;
    const size_t smem = fa2_tc_smem_bytes(d, Br, Bc, warps) + extra_smem;
    fa2_tc_set_smem(f, smem);
    const dim3 grid((unsigned)((N + Br - 1) / Br), (unsigned)H, (unsigned)B);
    const float sl2 = 1.4426950408889634f / sqrtf((float)d);
    f<<<grid, 32 * warps, smem, stream>>>(Q, K, V, O, N, causal ? 1 : 0, sl2);
    fa2_tc_check(cudaGetLastError(), "launch");
}

void fa2_tc_launch(const void* Q, const void* K, const void* V, void* O, int B, int H, int N, int d, int Br,
                   int Bc, int warps, int dtype, int causal, cudaStream_t stream) {
    fa2_tc_launch_ex(Q, K, V, O, B, H, N, d, Br, Bc, warps, dtype, causal, 0, stream);
}

cudaFuncAttributes fa2_tc_attributes(int d, int Br, int Bc, int warps, int dtype) {
    const Fa2TcKernel f = fa2_tc_kernel_for(fa2_tc_find(d, Br, Bc, warps), dtype);
    cudaFuncAttributes a;
    fa2_tc_check(cudaFuncGetAttributes(&a, (const void*)f), "cudaFuncGetAttributes");
    return a;
}

int fa2_tc_max_blocks_per_sm(int d, int Br, int Bc, int warps, int dtype, size_t extra_smem) {
    const Fa2TcKernel f = fa2_tc_kernel_for(fa2_tc_find(d, Br, Bc, warps), dtype);
    const size_t smem = fa2_tc_smem_bytes(d, Br, Bc, warps) + extra_smem;
    fa2_tc_set_smem(f, smem);
    int n = 0;
    fa2_tc_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, (const void*)f, 32 * warps, smem), "occupancy");
    return n;
}
