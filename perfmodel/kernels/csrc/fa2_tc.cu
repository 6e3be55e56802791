#ifndef FA2TC_BODY
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
//
// Inference extensions (issue 59; fa2_tc_ext_kernel, the same text with FA2TC_BODY == 2, compiled for
// kFa2TcExtInstances only; the kernel above is unchanged, SASS included): Q, O (B, H, Nq, d), K, V (B, Hkv, Nk, d),
// query head h reads K/V head h / (H/Hkv) (computed once per block); causal bottom-right, query i sees keys
// j <= i + off, off = Nk - Nq, with rows counted in key coordinates (wrow0 += off, O's base moved by -off rows)
// so that the KV loop's mask and bounds are the square code with N = Nk; a row that sees no key keeps l = 0 and
// gets O = 0. LSE (optional): (m * sl2 + log2 l) * ln 2 per row, written by lane t == 0 of each quad in the
// epilogue (+inf where l = 0). Split-KV: grid.x = ceil(Nq/BR) * splits; block (split s, Q tile) visits KV tiles
// [s*per, min(nt, (s+1)*per)), per = ceil(ceil(Nk/BC)/splits), and writes fp32 O/l and its LSE (-inf where
// l = 0) to o_part/lse_part; fa2_tc_combine_kernel (one warp per row) merges them. With Nq == 1 and H > Hkv the
// launch folds the H/Hkv query heads of a K/V head into the rows of one problem (FA2's decode layout).
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
#include "sm_timer.cuh"

namespace fa2tc {

using fa2tc_ptx::cp_async_16;
using fa2tc_ptx::cp_async_commit;
using fa2tc_ptx::cp_async_wait_all;
using fa2tc_ptx::ex2;
using fa2tc_ptx::ldsm_x4;
using fa2tc_ptx::ldsm_x4_t;
using fa2tc_ptx::mma16816;
using fa2tc_ptx::pack2;
using fa2tc_ptx::scale_shift;
using fa2tc_ptx::smem_addr;
using fa2tc_ptx::load_tile;
using fa2tc_ptx::step_off;
using fa2tc_ptx::swz;
using fa2tc_ptx::tile_off;

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

// The inference extensions (fa2_tc_ext_kernel only), passed after the original arguments: N is then the KEY
// count Nk and the query count is nq. group = H/Hkv query heads share a K/V head (gridDim.y = H). lse: null or
// fp32 (B, H, Nq). grid.x = mblocks * splits: block x takes split x / mblocks of Q tile x % mblocks; with
// splits > 1 it writes fp32 o_part (splits, B, H, Nq, d) and lse_part (splits, B, H, Nq) instead of O.
struct Fa2TcExt {
    int nq, group, splits, mblocks;
    float* lse;
    float* o_part;
    float* lse_part;
};

// The attention kernels, read twice from the end of this file (FA2TC_BODY): 1 gives fa2_tc_kernel, today's
// kernel for every instance of kFa2TcInstances (square, one K/V head per head, one split, no LSE), whose text
// is the kernel's as it was before the inference extensions, so that its code, KV loop included, is unchanged
// (the committed model reads its instruction tables off that SASS); 2 gives fa2_tc_ext_kernel, the same code
// with the extensions (grouped K/V heads, Nq != Nk with bottom-right causal, optional LSE, split-KV partials
// for the combine kernel), compiled for kFa2TcExtInstances only.
#define FA2TC_BODY 1
#include "fa2_tc.cu"
#undef FA2TC_BODY
#define FA2TC_BODY 2
#include "fa2_tc.cu"
#undef FA2TC_BODY

// Combine of the split-KV partials (FA2's flash_fwd_splitkv_combine_kernel, reduced): one warp per row of
// O (rows = B*H*Nq), 4 warps a block. L = log(sum_s exp(lse_s)) (max-shifted; +inf if every split was empty),
// O = sum_s exp(lse_s - L) * o_s (splits with weight 0 are not read), lse = L when asked for. Lane j holds
// columns [j*D/32, (j+1)*D/32): each split's row is one coalesced D*4-byte read by the warp.
template <typename T, int D>
__global__ void __launch_bounds__(128)
    fa2_tc_combine_kernel(const float* __restrict__ o_part, const float* __restrict__ lse_part, T* __restrict__ O,
                          float* __restrict__ lse, int rows, int splits) {
    constexpr int PL = D / 32;
    const int lane = threadIdx.x & 31;
    const int row = (int)blockIdx.x * 4 + (int)(threadIdx.x >> 5);
    if (row >= rows) return;
    float mx = -INFINITY;
    for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, lse_part[(size_t)s * rows + row]);
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, k));
    const float mref = mx == -INFINITY ? 0.f : mx;
    float sum = 0.f;
    for (int s = lane; s < splits; s += 32) sum += expf(lse_part[(size_t)s * rows + row] - mref);
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, k);
    const float L = (sum == 0.f || sum != sum) ? INFINITY : mref + logf(sum);
    float acc[PL];
#pragma unroll
    for (int i = 0; i < PL; ++i) acc[i] = 0.f;
    for (int s = 0; s < splits; ++s) {
        const float w = expf(lse_part[(size_t)s * rows + row] - L);  // warp-uniform
        if (w == 0.f) continue;
        const float* src = o_part + ((size_t)s * rows + row) * D + lane * PL;
        float v[PL];
        if constexpr (PL % 4 == 0) {
#pragma unroll
            for (int i = 0; i < PL; i += 4) *reinterpret_cast<float4*>(v + i) = *reinterpret_cast<const float4*>(src + i);
        } else if constexpr (PL == 2) {
            *reinterpret_cast<float2*>(v) = *reinterpret_cast<const float2*>(src);
        } else {
            v[0] = src[0];
        }
#pragma unroll
        for (int i = 0; i < PL; ++i) acc[i] = fmaf(w, v[i], acc[i]);
    }
    T* dst = O + (size_t)row * D + lane * PL;
    if constexpr (PL == 1) {
        if constexpr (std::is_same<T, __half>::value) dst[0] = __float2half_rn(acc[0]);
        else dst[0] = __float2bfloat16_rn(acc[0]);
    } else {
        uint32_t pk[PL / 2];
#pragma unroll
        for (int i = 0; i < PL / 2; ++i) pk[i] = pack2<T>(acc[2 * i], acc[2 * i + 1]);
        if constexpr (PL == 2) *reinterpret_cast<uint32_t*>(dst) = pk[0];
        else if constexpr (PL == 4) *reinterpret_cast<uint2*>(dst) = make_uint2(pk[0], pk[1]);
        else *reinterpret_cast<uint4*>(dst) = make_uint4(pk[0], pk[1], pk[2], pk[3]);
    }
    if (lse != nullptr && lane == 0) lse[row] = L;
}

}  // namespace fa2tc

using Fa2TcKernel = void (*)(const void*, const void*, const void*, void*, int, int, float);
using Fa2TcExtKernel = void (*)(const void*, const void*, const void*, void*, int, int, float, fa2tc::Fa2TcExt);

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

// Instances of the inference kernel (fa2_tc_ext_kernel: grouped heads, Nq != Nk, LSE, split-KV), a subset since
// each doubles its instance's compile time. FA2's split tiles are 64 x 256 (d <= 64), 64 x 128 (d <= 128),
// 64 x 64 (d > 128), 4 warps; here d 64 and 128 with Br 64 and 128, d 32 and 256 with 64 x 64, all 4 warps.
// Not compiled in the trace builds.
struct Fa2TcExtInstance {
    int d, br, bc, warps;
    Fa2TcExtKernel fn[2];  // [0] fp16, [1] bf16
};
#define FA2TC_EXT_INST(D, BR, BC, W)                                                                      \
    {                                                                                                     \
        D, BR, BC, W, {                                                                                   \
            fa2tc::fa2_tc_ext_kernel<__half, D, BR, BC, W>, fa2tc::fa2_tc_ext_kernel<__nv_bfloat16, D, BR, BC, W> \
        }                                                                                                 \
    }
static const std::vector<Fa2TcExtInstance> kFa2TcExtInstances = {
#ifndef FA2TC_TRACE
    FA2TC_EXT_INST(32, 64, 64, 4),   FA2TC_EXT_INST(64, 64, 128, 4), FA2TC_EXT_INST(64, 128, 128, 4),
    FA2TC_EXT_INST(128, 64, 128, 4), FA2TC_EXT_INST(128, 128, 64, 4), FA2TC_EXT_INST(256, 64, 64, 4),
#endif
};

using Fa2TcCombine = void (*)(const float*, const float*, void*, float*, int, int, cudaStream_t);
template <typename T, int D>
static void fa2_tc_combine_launch(const float* op, const float* lp, void* O, float* lse, int rows, int splits,
                                  cudaStream_t stream) {
    fa2tc::fa2_tc_combine_kernel<T, D><<<(unsigned)((rows + 3) / 4), 128, 0, stream>>>(op, lp, static_cast<T*>(O),
                                                                                       lse, rows, splits);
}

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

template <typename F>
static void fa2_tc_set_smem(F f, size_t smem) {
    if (smem > 48 * 1024)
        fa2_tc_check(cudaFuncSetAttribute((const void*)f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                     "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

std::vector<std::array<int, 4>> fa2_tc_splitkv_instances() {
    std::vector<std::array<int, 4>> v;
    for (const auto& in : kFa2TcExtInstances) v.push_back({in.d, in.br, in.bc, in.warps});
    return v;
}

// The general launch. Q, O: (B, H, Nq, d); K, V: (B, Hkv, Nk, d), all contiguous, H % Hkv == 0; query head h
// reads K/V head h / (H/Hkv). causal: query i sees keys j <= i + Nk - Nq; a row that sees no key gets O = 0
// (and LSE = +inf). lse: null or fp32 (B, H, Nq). splits > 1: fa2_tc_ext_kernel (kFa2TcExtInstances) writes
// o_part (splits, B, H, Nq, d) and lse_part (splits, B, H, Nq), fp32, then the combine kernel writes O (and lse).
// Decode with grouped heads (Nq == 1, H > Hkv) runs as FA2 does: the H/Hkv query heads of a K/V head are the
// rows of one problem (Q viewed as (B, Hkv, H/Hkv, d), the same memory; causal is moot with one query), so one
// block reads each K/V tile once for all of them; the grid is then (ceil(g/Br) * splits, Hkv, B), g = H/Hkv.
// extra_smem: dynamic shared memory asked for beyond the tiles' and never touched, so that fewer blocks fit an SM
// (research/scripts/probe_coresident.py times one tile at one, two or four blocks a SM in the same grid)
void fa2_tc_launch_ex2(const void* Q, const void* K, const void* V, void* O, int B, int H, int Hkv, int Nq, int Nk,
                       int d, int Br, int Bc, int warps, int dtype, int causal, float* lse, int splits, float* o_part,
                       float* lse_part, size_t extra_smem, cudaStream_t stream) {
    if (B < 1 || H < 1 || Hkv < 1 || Nq < 0 || Nk < 0)
        throw std::runtime_error("fa2_tc: need B, H, Hkv >= 1 and Nq, Nk >= 0 (got B=" + std::to_string(B) +
                                 ", H=" + std::to_string(H) + ", Hkv=" + std::to_string(Hkv) + ", Nq=" +
                                 std::to_string(Nq) + ", Nk=" + std::to_string(Nk) + ")");
    if (H % Hkv != 0)
        throw std::runtime_error("fa2_tc: H=" + std::to_string(H) + " is not a multiple of Hkv=" + std::to_string(Hkv));
    if (splits < 1) throw std::runtime_error("fa2_tc: splits must be >= 1, got " + std::to_string(splits));
    if (splits > 1 && (o_part == nullptr || lse_part == nullptr))
        throw std::runtime_error("fa2_tc: splits > 1 needs the o_part and lse_part workspaces");
    if (H > 65535 || B > 65535) throw std::runtime_error("fa2_tc: B and H must be <= 65535 (grid y and z)");
    if (dtype != 0 && dtype != 1)
        throw std::runtime_error("fa2_tc: dtype must be 0 (fp16) or 1 (bf16), got " + std::to_string(dtype));
    const auto& base = fa2_tc_find(d, Br, Bc, warps);
    if (Nq == 0) return;
    if (Nq == 1 && H > Hkv) {  // grouped decode: fold the group's query heads into the rows (see above)
        Nq = H / Hkv;
        H = Hkv;
        causal = 0;
    }
    const size_t smem = fa2_tc_smem_bytes(d, Br, Bc, warps) + extra_smem;
    const float sl2 = 1.4426950408889634f / sqrtf((float)d);
    const int mblocks = (Nq + Br - 1) / Br;
    if (H == Hkv && Nq == Nk && splits == 1 && lse == nullptr) {  // today's problem: today's kernel, any instance
        const Fa2TcKernel f = base.fn[dtype];
        fa2_tc_set_smem(f, smem);
        f<<<dim3((unsigned)mblocks, (unsigned)H, (unsigned)B), 32 * warps, smem, stream>>>(Q, K, V, O, Nk,
                                                                                          causal ? 1 : 0, sl2);
        fa2_tc_check(cudaGetLastError(), "launch");
        return;
    }
    Fa2TcExtKernel f = nullptr;
    for (const auto& in : kFa2TcExtInstances)
        if (in.d == d && in.br == Br && in.bc == Bc && in.warps == warps) f = in.fn[dtype];
    if (f == nullptr)
        throw std::runtime_error("fa2_tc: grouped heads, Nq != Nk, lse or splits > 1 need an instance of "
                                 "fa2_tc_splitkv_instances(), not (d=" + std::to_string(d) + ", Br=" +
                                 std::to_string(Br) + ", Bc=" + std::to_string(Bc) + ", warps=" +
                                 std::to_string(warps) + ")");
    if ((long long)mblocks * splits > 0x7fffffffLL) throw std::runtime_error("fa2_tc: Q tiles * splits > 2^31 - 1");
    fa2_tc_set_smem(f, smem);
    const dim3 grid((unsigned)(mblocks * splits), (unsigned)H, (unsigned)B);
    const fa2tc::Fa2TcExt x{Nq, H / Hkv, splits, mblocks, splits == 1 ? lse : nullptr,
                            splits == 1 ? nullptr : o_part, splits == 1 ? nullptr : lse_part};
    f<<<grid, 32 * warps, smem, stream>>>(Q, K, V, O, Nk, causal ? 1 : 0, sl2, x);
    fa2_tc_check(cudaGetLastError(), "launch");
    if (splits == 1) return;
    const long long rows = (long long)B * H * Nq;
    if (rows > 0x7fffffffLL) throw std::runtime_error("fa2_tc: B*H*Nq > 2^31 - 1 rows to combine");
    Fa2TcCombine c = nullptr;
    if (dtype == 0) {
        c = d == 32 ? fa2_tc_combine_launch<__half, 32> : d == 64 ? fa2_tc_combine_launch<__half, 64>
          : d == 128 ? fa2_tc_combine_launch<__half, 128> : d == 256 ? fa2_tc_combine_launch<__half, 256> : nullptr;
    } else {
        c = d == 32 ? fa2_tc_combine_launch<__nv_bfloat16, 32> : d == 64 ? fa2_tc_combine_launch<__nv_bfloat16, 64>
          : d == 128 ? fa2_tc_combine_launch<__nv_bfloat16, 128>
          : d == 256 ? fa2_tc_combine_launch<__nv_bfloat16, 256> : nullptr;
    }
    if (c == nullptr) throw std::runtime_error("fa2_tc: no combine kernel for d=" + std::to_string(d));
    c(o_part, lse_part, O, lse, (int)rows, splits, stream);
    fa2_tc_check(cudaGetLastError(), "combine launch");
}

// The square, one-split launch of before the extensions (probe and trace scripts call it): Q, K, V, O (B, H, N, d).
void fa2_tc_launch_ex(const void* Q, const void* K, const void* V, void* O, int B, int H, int N, int d, int Br,
                      int Bc, int warps, int dtype, int causal, size_t extra_smem, cudaStream_t stream) {
    fa2_tc_launch_ex2(Q, K, V, O, B, H, H, N, N, d, Br, Bc, warps, dtype, causal, nullptr, 1, nullptr, nullptr,
                      extra_smem, stream);
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

#else  // FA2TC_BODY: the attention kernel's text (see "read twice" above), inside namespace fa2tc

template <typename T, int D, int BR, int BC, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
#if FA2TC_BODY == 1
    fa2_tc_kernel(const void* __restrict__ Qv, const void* __restrict__ Kv, const void* __restrict__ Vv,
                  void* __restrict__ Ov, int N, int causal, float sl2) {
#define FA2TC_JLO 0
#else
    fa2_tc_ext_kernel(const void* __restrict__ Qv, const void* __restrict__ Kv, const void* __restrict__ Vv,
                      void* __restrict__ Ov, int N, int causal, float sl2, Fa2TcExt x) {
#define FA2TC_JLO jlo
#endif
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
#if FA2TC_BODY == 1
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * BR;
    const size_t head = ((size_t)blockIdx.z * gridDim.y + blockIdx.y) * (size_t)N * D;
    const T* __restrict__ Q = static_cast<const T*>(Qv) + head;
    const T* __restrict__ K = static_cast<const T*>(Kv) + head;
    const T* __restrict__ V = static_cast<const T*>(Vv) + head;
    T* __restrict__ O = static_cast<T*>(Ov) + head;

    const int kv_end = causal ? min(N, q0 + BR) : N;
    const int nt = (kv_end + BC - 1) / BC;
    const int wrow0 = q0 + warp * RW;  // first query row of this warp
#else
    // Computed once per block. nq queries, N = Nk keys; off = Nk - Nq: query i sees keys j <= i + off
    // (bottom-right causal). Rows are counted in KEY coordinates from here on (wrow0, and O's and lse's row 0
    // is key row off), so the KV loop and the epilogue's bounds are the square kernel's code with N = Nk.
    const int nq = x.nq, off = N - nq;
    const int split = (int)blockIdx.x / x.mblocks;
    const int q0 = (x.mblocks - 1 - ((int)blockIdx.x - split * x.mblocks)) * BR;
    const size_t bh = (size_t)blockIdx.z * gridDim.y + blockIdx.y;           // query head
    const size_t kvh = (size_t)blockIdx.z * (gridDim.y / x.group) + blockIdx.y / x.group;  // its K/V head
    const T* __restrict__ Q = static_cast<const T*>(Qv) + bh * (size_t)nq * D;
    const T* __restrict__ K = static_cast<const T*>(Kv) + kvh * (size_t)N * D;
    const T* __restrict__ V = static_cast<const T*>(Vv) + kvh * (size_t)N * D;
    T* __restrict__ O = static_cast<T*>(Ov) + (ptrdiff_t)(bh * (size_t)nq * D) - (ptrdiff_t)off * D;

    // KV tiles [jlo, nt), visited from the last: causal clips the end; a split takes its chunk of whole tiles
    // (FA2's n_blocks_per_split = ceil(ceil(Nk/BC)/splits)). The range may be empty (rows that see no key, or
    // a split past the last tile): the loop then runs no iteration and the block writes O = 0.
    const int kv_end = causal ? min(N, q0 + BR + off) : N;
    const int per = ((N + BC - 1) / BC + x.splits - 1) / x.splits;
    const int jlo = split * per;
    const int nt = min((kv_end + BC - 1) / BC, jlo + per);
    const int wrow0 = q0 + warp * RW + off;  // first query row of this warp, in key coordinates
#endif

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

#if FA2TC_BODY == 1
    load_tile<T, BR, D, THREADS>(sQ, Q, q0, N, tid);
    load_tile<T, BC, D, THREADS>(sK, K, (nt - 1) * BC, N, tid);
#else
    load_tile<T, BR, D, THREADS>(sQ, Q, q0, nq, tid);
    load_tile<T, BC, D, THREADS>(sK, K, max(nt - 1, 0) * BC, N, tid);  // an empty range loads tile 0, unused
#endif
    cp_async_commit();

    uint32_t qr[QREG ? KQ : 1][4];
    if constexpr (QREG) {
        cp_async_wait_all();
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < KQ; ++ks) ldsm_x4(qr[ks], sQ + step_off(qa0, ks));
    }

    for (int jt = nt - 1; jt >= FA2TC_JLO; --jt) {
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
                    s[mi][j][2 * h] = ex2(scale_shift(s[mi][j][2 * h], sl2, ms));
                    s[mi][j][2 * h + 1] = ex2(scale_shift(s[mi][j][2 * h + 1], sl2, ms));
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
        if (jt > FA2TC_JLO) {
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

#if FA2TC_BODY == 1
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
#else
    // An empty KV range ran no loop iteration, so nothing waited for the prologue's copies (the Q tile is
    // overwritten below): a block-uniform branch, outside the loop.
    if (nt <= jlo) {
        cp_async_wait_all();
        __syncthreads();
    }
    constexpr float LN2 = 0.69314718055994531f;
    const int g = lane >> 2, t = lane & 3;
    if (x.o_part != nullptr) {
        // Split-KV: fp32 partial O normalised by this split's row sum, straight from the accumulators (a quad
        // writes 32 contiguous bytes of a row per n8 tile), and the partial LSE (natural log of the split's sum
        // of exp of the scaled scores; -inf where the split saw no key of the row, whose O is then 0).
        const size_t prow = ((size_t)split * gridDim.z * gridDim.y + bh) * (size_t)nq;  // (split, b, h) row 0
        float* __restrict__ op = x.o_part + (ptrdiff_t)(prow * D) - (ptrdiff_t)off * D;
        float* __restrict__ lp = x.lse_part + (ptrdiff_t)prow - off;
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float lt = l[mi][h];
                lt += __shfl_xor_sync(0xffffffffu, lt, 1);
                lt += __shfl_xor_sync(0xffffffffu, lt, 2);
                const float inv = lt > 0.f ? __frcp_rn(lt) : 0.f;
                const int gr = wrow0 + mi * 16 + g + 8 * h;
                if (gr < N) {
#pragma unroll
                    for (int n = 0; n < NO; ++n)
                        *reinterpret_cast<float2*>(op + (ptrdiff_t)gr * D + n * 8 + 2 * t) =
                            make_float2(o[mi][n][2 * h] * inv, o[mi][n][2 * h + 1] * inv);
                    if (t == 0) lp[gr] = lt > 0.f ? (m[mi][h] * sl2 + log2f(lt)) * LN2 : -INFINITY;
                }
            }
    } else {
        // O / l staged as in the square kernel; with lse asked for, lane t == 0 of each quad writes its rows'
        // natural-log LSE (+inf for a row that saw no key, FA2's convention: the backward's exp(S - LSE) is 0).
        float* __restrict__ lr = x.lse ? x.lse + (ptrdiff_t)(bh * (size_t)nq) - off : nullptr;
        __syncwarp();
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
                const int gr = wrow0 + mi * 16 + g + 8 * h;
                if (lr != nullptr && t == 0 && gr < N)
                    lr[gr] = lt > 0.f ? (m[mi][h] * sl2 + log2f(lt)) * LN2 : INFINITY;
            }
        __syncwarp();
        constexpr int CPR = D / 8;
#pragma unroll
        for (int i = 0; i < RW * CPR / 32; ++i) {
            const int c = lane + 32 * i;
            const int r = c / CPR, k = c % CPR;
            const int gr = wrow0 + r;
            if (gr < N)
                *reinterpret_cast<uint4*>(O + (ptrdiff_t)gr * D + k * 8) =
                    *reinterpret_cast<const uint4*>(smem + tile_off<D>(warp * RW + r, k));
        }
    }
#endif
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
#undef FA2TC_JLO
#endif  // FA2TC_BODY
