// fa2_tc_bwd: tensor-core FlashAttention-2 backward (FA2 paper, Algorithm 2), fp16 or bf16 in, fp32 accumulation.
// Plain CUDA C++ with inline PTX (mma.sync m16n8k16, ldmatrix, cp.async, red.global); no CUTLASS/CuTe, no torch
// headers. Builds for sm_80, sm_86 and sm_90 (mma.sync path; no wgmma). The device helpers are copies of
// fa2_tc.cu's, in this file's own namespace, so that the forward can change without touching the backward.
//
// Problem: Q, O, dO, dQ (B, H, Nq, d); K, V, dK, dV (B, Hkv, Nk, d), all contiguous, one dtype; H % Hkv == 0,
// query head h reads K/V head h / (H / Hkv). LSE (B, H, Nq) fp32: natural-log log-sum-exp of the scaled scores
// (scale 1/sqrt(d)). Causal is aligned bottom-right: query i sees keys j <= i + Nk - Nq.
//
// Three launches on one stream:
//   1. fa2_tc_bwd_pre: Dsum = rowsum(dO * O) in fp32 (B, H, Nq); dQ_accum (fp32, (B, H, Nq, d)) = 0.
//      One thread per 16-byte chunk (8 elements) of a row; the d/8 threads of a row reduce by shuffles.
//   2. fa2_tc_bwd_kernel: one block per (K/V tile of BC keys, b, K/V head): grid (ceil(Nk/BC), Hkv, B).
//      K and V tiles are loaded once (cp.async) and stay in shared memory; dK and dV accumulate in registers over
//      every Q tile (BR rows) of every query head of the group (G = H/Hkv), so the group's sum stays on chip.
//      Per (query head, Q tile) pair, it = 0 .. G*(m_max - m_min) - 1 (m_min > 0 only under causal: the Q tiles
//      whose rows all precede the K tile's first visible query are skipped):
//        a. cp.async.wait_group 0; __syncthreads            (Q/dO/LSE/Dsum of pair it landed)
//        b. cp.async Q, dO, LSE, Dsum of pair it+1 into the other buffer; commit (double-buffered)
//        c. S = Q K^T, dP = dO V^T (warps in a WSM x WSN grid over BR x BC; A and B by ldmatrix.x4, non-trans)
//        d. P = exp2(S * scale*log2e - LSE*log2e) (masked to 0 on ragged/causal-diagonal tiles),
//           dS = P * (dP - Dsum); P and dS packed to T and stored into shared tiles [BR][BC]
//        e. __syncthreads
//        f. dV += P^T dO, dK += dS^T Q  (warps in a WKN x WKD grid over BC x d; A = P^T / dS^T by
//           ldmatrix.x4.trans from the [BR][BC] tiles, B = dO / Q by ldmatrix.x4.trans)
//        g. dQ_part = dS K (warps in a WQM x WQD grid over BR x d; A = dS ldmatrix.x4, B = K ldmatrix.x4.trans),
//           added to dQ_accum with red.global.add (v2.f32 on sm_90, two scalar atomics before), rows >= Nq skipped
//      Five GEMMs per pair: 2*BR*BC*d flops each. Epilogue: dK * scale and dV packed to T, staged through the K/V
//      tiles (same swizzle), 16-byte stores, rows >= Nk skipped. A block that sees no query writes dK = dV = 0.
//   3. fa2_tc_bwd_convert: dQ = T(dQ_accum * scale), 8 elements a thread.
//
// Shared memory (dynamic): K, V [BC][d]; Q, dO [2][BR][d]; P, dS [BR][BC]; LSE, Dsum [2][BR] fp32. Tiles of rows
// of W 16-bit elements, unpadded, XOR-swizzled in 16-byte chunks: chunk c of row r sits at c ^ (r & 7) (W >= 64)
// or c ^ ((r >> 1) & 3) (W = 32): every ldmatrix (trans or not), cp.async and 4-byte staging phase is
// conflict-free. Sizes: fa2_tc_bwd_smem_bytes.
//
// Bounds: Q/dO/K/V rows past the end are zero-filled by cp.async (src-size 0), LSE/Dsum too. Padded query rows
// then give dO = 0 and Dsum = 0, so dS = 0 and P^T dO = 0: they add nothing; their dQ rows are not written.
// Padded keys are masked (P = 0) on the last K tile; their dK/dV rows are not written. Rows with no visible key
// (causal, Nq > Nk) get P = 0 whatever their LSE, so dQ = 0 there.
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

#include "fa2_tc_ptx.cuh"

namespace fa2tcb {

using fa2tc_ptx::cp_async_16;
using fa2tc_ptx::cp_async_commit;
using fa2tc_ptx::cp_async_wait_all;
using fa2tc_ptx::ex2;
using fa2tc_ptx::ldsm_x4;
using fa2tc_ptx::ldsm_x4_t;
using fa2tc_ptx::mma16816;
using fa2tc_ptx::pack2;
using fa2tc_ptx::smem_addr;
using fa2tc_ptx::load_tile;
using fa2tc_ptx::step_off;
using fa2tc_ptx::swz;
using fa2tc_ptx::tile_off;

// 4-byte copy (LSE, Dsum rows); src_bytes = 0 writes zero.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t v) {
    if constexpr (std::is_same<T, __half>::value) {
        return __half22float2(*reinterpret_cast<__half2*>(&v));
    } else {
        return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&v));
    }
}

// dQ_accum[p], [p+1] += a, b (fp32, in L2). sm_90 has a two-float vector reduction; older GPUs take two.
__device__ __forceinline__ void red_add2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

// A lane's chunk-hi address in row lrow (0..15) of a [rows][W] tile at s (128-byte aligned).
template <int W>
__device__ __forceinline__ uint32_t lane_base(uint32_t s, int lrow, int hi) {
    return s + (uint32_t)(lrow * (W * 2)) + (uint32_t)((hi ^ swz<W>(lrow)) << 4);
}

// acc[MT][NT][4] += A B for one warp: A is M x K (MT m16 tiles from row am), B is K x N (NT n8 tiles from column
// bn), K = 16*KS from 0. AT: A stored [k][m] in a tile of WA-element rows, read by ldmatrix.trans; else [m][k].
// BT: B stored [k][n] (WB-element rows), ldmatrix.trans; else [n][k]. am, bn: multiples of 16.
template <typename T, bool AT, bool BT, int MT, int NT, int KS, int WA, int WB>
__device__ __forceinline__ void wgemm(float (&acc)[MT][NT][4], uint32_t sA, int am, uint32_t sB, int bn, int lane) {
    static_assert(NT % 2 == 0, "B is read two n8 tiles at a time");
    constexpr int RA = WA * 2, RB = WB * 2;
    // per-lane ldmatrix rows and chunk halves (see fa2_tc.cu: Q/A non-trans, K/B non-trans, V/B trans)
    const uint32_t a0 = AT ? lane_base<WA>(sA, (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1)
                           : lane_base<WA>(sA, lane & 15, lane >> 4) + (uint32_t)(am * RA);
    const uint32_t b0 = BT ? lane_base<WB>(sB, (lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4)
                           : lane_base<WB>(sB, (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1) + (uint32_t)(bn * RB);
    uint32_t aoff[MT], boff[NT / 2];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) aoff[mi] = AT ? step_off(a0, am / 16 + mi) : a0 + mi * 16 * RA;
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) boff[np] = BT ? step_off(b0, bn / 16 + np) : b0 + np * 16 * RB;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        uint32_t af[MT][4];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            if constexpr (AT)
                ldsm_x4_t(af[mi], aoff[mi] + ks * 16 * RA);
            else
                ldsm_x4(af[mi], step_off(aoff[mi], ks));
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            uint32_t bf[4];
            if constexpr (BT)
                ldsm_x4_t(bf, boff[np] + ks * 16 * RB);
            else
                ldsm_x4(bf, step_off(boff[np], ks));
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                mma16816<T>(acc[mi][2 * np], af[mi], bf[0], bf[1]);
                mma16816<T>(acc[mi][2 * np + 1], af[mi], bf[2], bf[3]);
            }
        }
    }
}

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int j = 0; j < NT; ++j) acc[mi][j][0] = acc[mi][j][1] = acc[mi][j][2] = acc[mi][j][3] = 0.f;
}

// Store a warp's MT x NT accumulator tile (rows r0.., columns c0..) packed to T, times mul, into a [rows][W] tile.
template <typename T, int W, int MT, int NT>
__device__ __forceinline__ void stage(unsigned char* s, const float (&acc)[MT][NT][4], int r0, int c0, int lane,
                                      float mul) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = r0 + mi * 16 + g + 8 * h;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int c = c0 + j * 8;
                *reinterpret_cast<uint32_t*>(s + tile_off<W>(r, c >> 3) + 4 * t) =
                    pack2<T>(acc[mi][j][2 * h] * mul, acc[mi][j][2 * h + 1] * mul);
            }
        }
}

struct Params {
    const void *q, *k, *v, *dout;
    const float* lse;
    const float* dsum;
    float* dqacc;
    void *dk, *dv;
    int H, Hkv, Nq, Nk, causal;
    float scale, sl2;  // 1/sqrt(d), and times log2(e)
};

// Shared memory of one block, bytes.
__host__ __device__ constexpr int smem_bytes(int D, int BC, int BR) {
    return 2 * BC * D * 2 + 4 * BR * D * 2 + 2 * BR * BC * 2 + 4 * BR * 4;
}

template <typename T, int D, int BC, int BR, int WARPS, int WSM, int WKN, int WQM>
__global__ void __launch_bounds__(WARPS * 32, 1) fa2_tc_bwd_kernel(const Params p) {
    constexpr int THREADS = WARPS * 32;
    constexpr int WSN = WARPS / WSM, WKD = WARPS / WKN, WQD = WARPS / WQM;
    constexpr int RS = BR / WSM, CS = BC / WSN, MTS = RS / 16, NTS = CS / 8;
    constexpr int RK = BC / WKN, CK = D / WKD, MTK = RK / 16, NTK = CK / 8;
    constexpr int RQ = BR / WQM, CQ = D / WQD, MTQ = RQ / 16, NTQ = CQ / 8;
    static_assert(WSM * WSN == WARPS && WKN * WKD == WARPS && WQM * WQD == WARPS, "warp grids");
    static_assert(RS % 16 == 0 && CS % 16 == 0 && RK % 16 == 0 && CK % 16 == 0 && RQ % 16 == 0 && CQ % 16 == 0,
                  "every warp tile is a whole number of m16 x n16 tiles");
    static_assert(BC >= 64 && D % 32 == 0, "BC >= 64 (the [BR][BC] tiles use the 128-byte swizzle), d % 32 == 0");
    constexpr int ROWB = D * 2, TILE_Q = BR * ROWB, TILE_K = BC * ROWB, TILE_P = BR * BC * 2;
    constexpr float LOG2E = 1.4426950408889634f;

    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sK = smem_addr(smem), sV = sK + TILE_K, sQ0 = sV + TILE_K, sdO0 = sQ0 + 2 * TILE_Q;
    const uint32_t sP = sdO0 + 2 * TILE_Q, sdS = sP + TILE_P;
    unsigned char* const pP = smem + (sP - sK);
    unsigned char* const pdS = smem + (sdS - sK);
    float* const sLse = reinterpret_cast<float*>(smem + (sdS - sK) + TILE_P);  // [2][BR] LSE, then [2][BR] Dsum
    const uint32_t sLse0 = sdS + TILE_P;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n0 = blockIdx.x * BC, hk = blockIdx.y, b = blockIdx.z;
    const int H = p.H, Nq = p.Nq, Nk = p.Nk, G = H / p.Hkv;
    const size_t kvoff = ((size_t)b * p.Hkv + hk) * (size_t)Nk * D;
    const T* __restrict__ K = static_cast<const T*>(p.k) + kvoff;
    const T* __restrict__ V = static_cast<const T*>(p.v) + kvoff;

    // Q tiles of this K tile: causal skips those whose last row sees none of its keys (key n0 is first visible to
    // query n0 - (Nk - Nq)).
    const int shift = Nk - Nq;
    const int m_min = (p.causal && n0 - shift > 0) ? (n0 - shift) / BR : 0;
    const int m_max = (Nq + BR - 1) / BR;
    const int total = m_max > m_min ? G * (m_max - m_min) : 0;

    // warp roles
    const int wm = warp % WSM, wn = warp / WSM;    // S, dP: rows wm*RS, columns (keys) wn*CS
    const int wkn = warp % WKN, wkd = warp / WKN;  // dK, dV: keys wkn*RK, d columns wkd*CK
    const int wqm = warp % WQM, wqd = warp / WQM;  // dQ: rows wqm*RQ, d columns wqd*CQ

    // (query head g of the group, Q tile mb) pairs in order: mb from m_min to m_max - 1 for each g. The pair being
    // computed and the pair being loaded are stepped by counters (no division in the loop).
    const size_t head0 = ((size_t)b * H + (size_t)hk * G) * (size_t)Nq;  // first row of the group's first head
    auto issue = [&](int g, int mb, int buf) {
        const int m0 = mb * BR;
        const size_t row0 = head0 + (size_t)g * Nq;
        load_tile<T, BR, D, THREADS>(sQ0 + buf * TILE_Q, static_cast<const T*>(p.q) + row0 * D, m0, Nq, tid);
        load_tile<T, BR, D, THREADS>(sdO0 + buf * TILE_Q, static_cast<const T*>(p.dout) + row0 * D, m0, Nq, tid);
#pragma unroll
        for (int i = tid; i < 2 * BR; i += THREADS) {
            const int r = i % BR, which = i / BR;  // 0: LSE, 1: Dsum
            const float* src = (which ? p.dsum : p.lse) + row0 + m0 + r;
            cp_async_4(sLse0 + (uint32_t)((which * 2 + buf) * BR + r) * 4, src, m0 + r < Nq ? 4 : 0);
        }
    };
    auto step = [&](int& g, int& mb) {
        if (++mb == m_max) {
            mb = m_min;
            ++g;
        }
    };

    load_tile<T, BC, D, THREADS>(sK, K, n0, Nk, tid);
    load_tile<T, BC, D, THREADS>(sV, V, n0, Nk, tid);
    int g_ld = 0, mb_ld = m_min;  // next pair to load
    if (total > 0) {
        issue(g_ld, mb_ld, 0);
        step(g_ld, mb_ld);
    }
    cp_async_commit();

    float dk[MTK][NTK][4], dv[MTK][NTK][4];
    zero(dk);
    zero(dv);
    const int g4 = lane >> 2, t4 = lane & 3;
    // P/dS staging: element (row r, column c) of a warp's S tile sits at byte tile_off<BC>(r, c / 8) + 2 (c % 8) of
    // the [BR][BC] tile. A thread's rows are g4 + multiples of 8 (r & 7 = g4) and its chunks cw + j with cw a multiple
    // of NTS (a power of 2 > j), so chunk (cw + j) ^ g4 = (cw ^ g4) ^ j: one XOR per n8 tile on a fixed base.
    const uint32_t st_base =
        (uint32_t)((wm * RS + g4) * (BC * 2) + ((((wn * CS) >> 3) ^ g4) << 4) + 4 * t4);
    static_assert((NTS & (NTS - 1)) == 0 && NTS <= 16, "the S tile's n8 tiles a warp: a power of 2, <= 16");

    int g = 0, mb = m_min;  // pair being computed
    for (int it = 0; it < total; ++it, step(g, mb)) {
        const int buf = it & 1;
        cp_async_wait_all();
        __syncthreads();
        if (it + 1 < total) {
            issue(g_ld, mb_ld, buf ^ 1);
            step(g_ld, mb_ld);
        }
        cp_async_commit();

        const int m0 = mb * BR;
        const size_t row0 = head0 + (size_t)g * Nq;
        const uint32_t sQ = sQ0 + buf * TILE_Q, sdO = sdO0 + buf * TILE_Q;

        // S = Q K^T and dP = dO V^T (fp32)
        float s[MTS][NTS][4], dp[MTS][NTS][4];
        zero(s);
        wgemm<T, false, false, MTS, NTS, D / 16, D, D>(s, sQ, wm * RS, sK, wn * CS, lane);
        zero(dp);
        wgemm<T, false, false, MTS, NTS, D / 16, D, D>(dp, sdO, wm * RS, sV, wn * CS, lane);

        // P = exp(S*scale - LSE), dS = P (dP - Dsum); staged as T for the transposed reads
        const bool masked = n0 + BC > Nk || (p.causal && n0 + BC - 1 > m0 + shift);
#pragma unroll
        for (int mi = 0; mi < MTS; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = wm * RS + mi * 16 + g4 + 8 * h;  // row in the tile
                const float lse2 = sLse[buf * BR + r] * LOG2E;
                const float ds = sLse[(2 + buf) * BR + r];
                // last visible key of this row, relative to this thread's first column
                const int lim = (p.causal ? min(Nk - 1, m0 + r + shift) : Nk - 1) - (n0 + wn * CS + 2 * t4);
#pragma unroll
                for (int j = 0; j < NTS; ++j) {
                    float pv[2], dsv[2];
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float pe = ex2(fmaf(s[mi][j][2 * h + e], p.sl2, -lse2));
                        if (masked && 8 * j + e > lim) pe = 0.f;
                        pv[e] = pe;
                        dsv[e] = pe * (dp[mi][j][2 * h + e] - ds);
                    }
                    const uint32_t off = (st_base + (uint32_t)((mi * 16 + 8 * h) * (BC * 2))) ^ (uint32_t)(j << 4);
                    *reinterpret_cast<uint32_t*>(pP + off) = pack2<T>(pv[0], pv[1]);
                    *reinterpret_cast<uint32_t*>(pdS + off) = pack2<T>(dsv[0], dsv[1]);
                }
            }
        __syncthreads();

        // dV += P^T dO, dK += dS^T Q
        wgemm<T, true, true, MTK, NTK, BR / 16, BC, D>(dv, sP, wkn * RK, sdO, wkd * CK, lane);
        wgemm<T, true, true, MTK, NTK, BR / 16, BC, D>(dk, sdS, wkn * RK, sQ, wkd * CK, lane);

        // dQ += dS K, into dQ_accum
        float dq[MTQ][NTQ][4];
        zero(dq);
        wgemm<T, false, true, MTQ, NTQ, BC / 16, BC, D>(dq, sdS, wqm * RQ, sK, wqd * CQ, lane);
        float* const dqg = p.dqacc + (row0 + m0) * D;
#pragma unroll
        for (int mi = 0; mi < MTQ; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = wqm * RQ + mi * 16 + g4 + 8 * h;
                if (m0 + r < Nq) {
#pragma unroll
                    for (int j = 0; j < NTQ; ++j)
                        red_add2(dqg + (size_t)r * D + wqd * CQ + j * 8 + 2 * t4, dq[mi][j][2 * h],
                                 dq[mi][j][2 * h + 1]);
                }
            }
    }

    // Epilogue: dK * scale and dV as T, staged through the K and V tiles, then 16-byte stores of rows < Nk.
    cp_async_wait_all();
    __syncthreads();
    stage<T, D>(smem, dk, wkn * RK, wkd * CK, lane, p.scale);
    stage<T, D>(smem + TILE_K, dv, wkn * RK, wkd * CK, lane, 1.f);
    __syncthreads();
    T* const dK = static_cast<T*>(p.dk) + kvoff;
    T* const dV = static_cast<T*>(p.dv) + kvoff;
    constexpr int CPR = D / 8;
    for (int c = tid; c < BC * CPR; c += THREADS) {
        const int r = c / CPR, k = c % CPR;
        if (n0 + r < Nk) {
            const uint32_t off = tile_off<D>(r, k);
            *reinterpret_cast<uint4*>(dK + (size_t)(n0 + r) * D + k * 8) = *reinterpret_cast<const uint4*>(smem + off);
            *reinterpret_cast<uint4*>(dV + (size_t)(n0 + r) * D + k * 8) =
                *reinterpret_cast<const uint4*>(smem + TILE_K + off);
        }
    }
}

// Dsum[row] = sum_d dO[row, :] * O[row, :] (fp32); dqacc[row, :] = 0. D/8 threads a row.
template <typename T, int D>
__global__ void __launch_bounds__(256) fa2_tc_bwd_pre(const T* __restrict__ O, const T* __restrict__ dO,
                                                      float* __restrict__ dsum, float* __restrict__ dqacc,
                                                      long long rows) {
    constexpr int CPR = D / 8;
    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long row = gid / CPR;
    const int k = (int)(gid % CPR);
    float acc = 0.f;
    if (row < rows) {
        const size_t off = (size_t)row * D + k * 8;
        const uint4 o = *reinterpret_cast<const uint4*>(O + off);
        const uint4 g = *reinterpret_cast<const uint4*>(dO + off);
        const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, gw[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 a = unpack2<T>(ow[i]), c = unpack2<T>(gw[i]);
            acc = fmaf(a.x, c.x, acc);
            acc = fmaf(a.y, c.y, acc);
        }
        float4* z = reinterpret_cast<float4*>(dqacc + off);
        z[0] = make_float4(0.f, 0.f, 0.f, 0.f);
        z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int w = CPR / 2; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);
    if (row < rows && k == 0) dsum[row] = acc;
}

// dQ = T(dqacc * scale), 8 elements a thread (n8 = numel / 8).
template <typename T>
__global__ void __launch_bounds__(256) fa2_tc_bwd_convert(const float* __restrict__ acc, T* __restrict__ dq,
                                                          long long n8, float scale) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    const float4 a = reinterpret_cast<const float4*>(acc)[2 * i];
    const float4 c = reinterpret_cast<const float4*>(acc)[2 * i + 1];
    uint4 o;
    o.x = pack2<T>(a.x * scale, a.y * scale);
    o.y = pack2<T>(a.z * scale, a.w * scale);
    o.z = pack2<T>(c.x * scale, c.y * scale);
    o.w = pack2<T>(c.z * scale, c.w * scale);
    reinterpret_cast<uint4*>(dq)[i] = o;
}

}  // namespace fa2tcb

using Fa2TcBwdKernel = void (*)(const fa2tcb::Params);

struct Fa2TcBwdInstance {
    int d, bc, br, warps;
    int wsm, wkn, wqm;     // warps along BR for S/dP, along BC for dK/dV, along BR for dQ
    Fa2TcBwdKernel fn[2];  // [0] fp16, [1] bf16
};

#define FA2TCB_INST(D, BC, BR, W, WSM, WKN, WQM)                                                 \
    {                                                                                            \
        D, BC, BR, W, WSM, WKN, WQM, {                                                           \
            fa2tcb::fa2_tc_bwd_kernel<__half, D, BC, BR, W, WSM, WKN, WQM>,                      \
                fa2tcb::fa2_tc_bwd_kernel<__nv_bfloat16, D, BC, BR, W, WSM, WKN, WQM>            \
        }                                                                                        \
    }

// The compiled (d, Bc, Br, warps) instances, with their warp grids. FA2's choices (flash_bwd_launch_template.h,
// sm80/sm90 with >= 144 KB of shared memory): d=32 Br x Bc 128x128/8, d=64 128x128/8 (AtomLayout 4,4,4),
// d=128 64x128/8 (2,4,2), d=256 64x64/8 (4,2,2) on H100. Registers, spills and smem: fa2_tc_bwd_attributes.
static const Fa2TcBwdInstance kFa2TcBwdInstances[] = {
    FA2TCB_INST(32, 128, 128, 8, 4, 4, 4),

    FA2TCB_INST(64, 128, 128, 8, 4, 4, 4),
    FA2TCB_INST(64, 128, 64, 8, 2, 4, 4),
    FA2TCB_INST(64, 64, 128, 8, 4, 2, 4),
    FA2TCB_INST(64, 64, 64, 4, 2, 2, 2),

    FA2TCB_INST(128, 128, 64, 8, 2, 4, 2),
    FA2TCB_INST(128, 64, 64, 8, 4, 2, 2),
    FA2TCB_INST(128, 64, 128, 8, 4, 2, 4),

    FA2TCB_INST(256, 64, 64, 8, 4, 2, 2),
};

static void fa2_tc_bwd_check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("fa2_tc_bwd: ") + what + ": " + cudaGetErrorString(e));
}

static const Fa2TcBwdInstance& fa2_tc_bwd_find(int d, int Bc, int Br, int warps) {
    for (const auto& in : kFa2TcBwdInstances)
        if (in.d == d && in.bc == Bc && in.br == Br && in.warps == warps) return in;
    throw std::runtime_error("fa2_tc_bwd: no compiled instance (d=" + std::to_string(d) + ", Bc=" +
                             std::to_string(Bc) + ", Br=" + std::to_string(Br) + ", warps=" + std::to_string(warps) +
                             "); fa2_tc_bwd_instances() lists them");
}

static Fa2TcBwdKernel fa2_tc_bwd_kernel_for(const Fa2TcBwdInstance& in, int dtype) {
    if (dtype != 0 && dtype != 1)
        throw std::runtime_error("fa2_tc_bwd: dtype must be 0 (fp16) or 1 (bf16), got " + std::to_string(dtype));
    return in.fn[dtype];
}

std::vector<std::array<int, 4>> fa2_tc_bwd_instances() {
    std::vector<std::array<int, 4>> v;
    for (const auto& in : kFa2TcBwdInstances) v.push_back({in.d, in.bc, in.br, in.warps});
    return v;
}

size_t fa2_tc_bwd_smem_bytes(int d, int Bc, int Br, int warps) {
    const auto& in = fa2_tc_bwd_find(d, Bc, Br, warps);
    return (size_t)fa2tcb::smem_bytes(in.d, in.bc, in.br);
}

static void fa2_tc_bwd_set_smem(Fa2TcBwdKernel f, size_t smem) {
    if (smem > 48 * 1024)
        fa2_tc_bwd_check(
            cudaFuncSetAttribute((const void*)f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
            "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

cudaFuncAttributes fa2_tc_bwd_attributes(int d, int Bc, int Br, int warps, int dtype) {
    const Fa2TcBwdKernel f = fa2_tc_bwd_kernel_for(fa2_tc_bwd_find(d, Bc, Br, warps), dtype);
    cudaFuncAttributes a;
    fa2_tc_bwd_check(cudaFuncGetAttributes(&a, (const void*)f), "cudaFuncGetAttributes");
    return a;
}

template <typename T>
static void fa2_tc_bwd_pre_launch(int d, const void* O, const void* dO, float* dsum, float* dqacc, long long rows,
                                  cudaStream_t st) {
    const long long threads = rows * (d / 8);
    const unsigned grid = (unsigned)((threads + 255) / 256);
    const T* o = static_cast<const T*>(O);
    const T* g = static_cast<const T*>(dO);
    switch (d) {
        case 32: fa2tcb::fa2_tc_bwd_pre<T, 32><<<grid, 256, 0, st>>>(o, g, dsum, dqacc, rows); break;
        case 64: fa2tcb::fa2_tc_bwd_pre<T, 64><<<grid, 256, 0, st>>>(o, g, dsum, dqacc, rows); break;
        case 128: fa2tcb::fa2_tc_bwd_pre<T, 128><<<grid, 256, 0, st>>>(o, g, dsum, dqacc, rows); break;
        case 256: fa2tcb::fa2_tc_bwd_pre<T, 256><<<grid, 256, 0, st>>>(o, g, dsum, dqacc, rows); break;
        default: throw std::runtime_error("fa2_tc_bwd: d must be 32, 64, 128 or 256");
    }
}

// The three launches of one backward on stream st. Q, O, dO, dQ: (B, H, Nq, d); K, V, dK, dV: (B, Hkv, Nk, d);
// LSE, Dsum: (B, H, Nq) fp32; dQacc: (B, H, Nq, d) fp32 workspace. dtype 0 fp16, 1 bf16.
void fa2_tc_bwd_launch(const void* Q, const void* K, const void* V, const void* O, const void* dO, const float* LSE,
                       void* dQ, void* dK, void* dV, float* dQacc, float* Dsum, int B, int H, int Hkv, int Nq,
                       int Nk, int d, int Bc, int Br, int warps, int dtype, int causal, cudaStream_t stream) {
    const auto& in = fa2_tc_bwd_find(d, Bc, Br, warps);
    const Fa2TcBwdKernel f = fa2_tc_bwd_kernel_for(in, dtype);
    if (B < 1 || H < 1 || Hkv < 1 || H % Hkv != 0 || Nq < 0 || Nk < 0)
        throw std::runtime_error("fa2_tc_bwd: need B, H, Hkv >= 1, H % Hkv == 0, Nq, Nk >= 0");
    if (Hkv > 65535 || B > 65535) throw std::runtime_error("fa2_tc_bwd: B and Hkv must be <= 65535 (grid y and z)");
    const long long rows = (long long)B * H * Nq;
    if (rows > 0) {
        if (dtype == 0)
            fa2_tc_bwd_pre_launch<__half>(d, O, dO, Dsum, dQacc, rows, stream);
        else
            fa2_tc_bwd_pre_launch<__nv_bfloat16>(d, O, dO, Dsum, dQacc, rows, stream);
        fa2_tc_bwd_check(cudaGetLastError(), "launch (preprocess)");
    }
    if (Nk > 0) {
        const float scale = 1.f / sqrtf((float)d);
        fa2tcb::Params p{Q, K, V, dO, LSE, Dsum, dQacc, dK, dV, H, Hkv, Nq, Nk, causal ? 1 : 0,
                         scale, scale * 1.4426950408889634f};
        const size_t smem = fa2_tc_bwd_smem_bytes(d, Bc, Br, warps);
        fa2_tc_bwd_set_smem(f, smem);
        const dim3 grid((unsigned)((Nk + Bc - 1) / Bc), (unsigned)Hkv, (unsigned)B);
        f<<<grid, 32 * warps, smem, stream>>>(p);
        fa2_tc_bwd_check(cudaGetLastError(), "launch (main)");
    }
    if (rows > 0) {
        const long long n8 = rows * d / 8;
        const unsigned grid = (unsigned)((n8 + 255) / 256);
        const float scale = 1.f / sqrtf((float)d);
        if (dtype == 0)
            fa2tcb::fa2_tc_bwd_convert<__half><<<grid, 256, 0, stream>>>(dQacc, static_cast<__half*>(dQ), n8, scale);
        else
            fa2tcb::fa2_tc_bwd_convert<__nv_bfloat16>
                <<<grid, 256, 0, stream>>>(dQacc, static_cast<__nv_bfloat16*>(dQ), n8, scale);
        fa2_tc_bwd_check(cudaGetLastError(), "launch (convert)");
    }
}
