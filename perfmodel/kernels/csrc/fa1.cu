// fa1: FlashAttention-1 loop order, after seed 000 (and tspeterkim/flash-attention-minimal's layout), fp32.
// Grid (B, H), Br threads per block, one thread per query row. Outer loop over K/V tiles, inner loop over Q
// tiles; O, l and m live in global memory between outer iterations. Shared tiles are unpadded:
//   Qi[Br][d], Kj[Bc][d], Vj[Bc][d], S[Br][Bc].
// Tiles and d are run-time arguments, so one build serves every configuration. N need not divide by Br or Bc.
// perfmodel/kernels/fa1.py describes this loop nest; keep the two in step.
#include <cuda_runtime.h>
#include <math.h>
#include <stdexcept>
#include <string>

__global__ void fa1_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                           float* __restrict__ O, float* __restrict__ l, float* __restrict__ m,
                           int N, int d, int Br, int Bc, float scale) {
    extern __shared__ float smem[];
    float* Qi = smem;
    float* Kj = Qi + Br * d;
    float* Vj = Kj + Bc * d;
    float* S = Vj + Bc * d;
    const int tx = threadIdx.x;
    const size_t bh = (size_t)blockIdx.x * gridDim.y + blockIdx.y;
    const float* Qh = Q + bh * N * d;
    const float* Kh = K + bh * N * d;
    const float* Vh = V + bh * N * d;
    float* Oh = O + bh * N * d;
    float* lh = l + bh * N;
    float* mh = m + bh * N;
    const int Tc = (N + Bc - 1) / Bc;
    const int Tr = (N + Br - 1) / Br;

    for (int j = 0; j < Tc; ++j) {
        const int kv0 = j * Bc;
        const int nc = min(Bc, N - kv0);
        for (int r = tx; r < nc; r += Br) {
            for (int x = 0; x < d; ++x) {
                Kj[r * d + x] = Kh[(size_t)(kv0 + r) * d + x];
                Vj[r * d + x] = Vh[(size_t)(kv0 + r) * d + x];
            }
        }
        __syncthreads();
        for (int i = 0; i < Tr; ++i) {
            const int row = i * Br + tx;
            if (row < N) {
                for (int x = 0; x < d; ++x) Qi[tx * d + x] = Qh[(size_t)row * d + x];
                const float m_prev = mh[row];
                const float l_prev = lh[row];
                float row_m = -INFINITY;
                for (int y = 0; y < nc; ++y) {
                    float sum = 0.f;
                    for (int x = 0; x < d; ++x) sum += Qi[tx * d + x] * Kj[y * d + x];
                    sum *= scale;
                    S[tx * Bc + y] = sum;
                    row_m = fmaxf(row_m, sum);
                }
                float row_l = 0.f;
                for (int y = 0; y < nc; ++y) {
                    const float p = __expf(S[tx * Bc + y] - row_m);
                    S[tx * Bc + y] = p;
                    row_l += p;
                }
                const float m_new = fmaxf(m_prev, row_m);
                const float e_prev = __expf(m_prev - m_new);
                const float e_cur = __expf(row_m - m_new);
                const float l_new = e_prev * l_prev + e_cur * row_l;
                const float inv_l = __fdividef(1.0f, l_new);
                const float a = l_prev * e_prev * inv_l;
                const float b = e_cur * inv_l;
                for (int x = 0; x < d; ++x) {
                    float pv = 0.f;
                    for (int y = 0; y < nc; ++y) pv += S[tx * Bc + y] * Vj[y * d + x];
                    const size_t o = (size_t)row * d + x;
                    Oh[o] = a * Oh[o] + b * pv;
                }
                mh[row] = m_new;
                lh[row] = l_new;
            }
        }
        __syncthreads();
    }
}

static void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

size_t fa1_smem_bytes(int d, int Br, int Bc) { return (size_t)(Br * d + 2 * Bc * d + Br * Bc) * sizeof(float); }

// O must hold zeros, l zeros and m -inf on entry (the FA1 recurrence reads them).
void fa1_launch(const float* Q, const float* K, const float* V, float* O, float* l, float* m,
                int B, int H, int N, int d, int Br, int Bc, cudaStream_t stream) {
    const size_t smem = fa1_smem_bytes(d, Br, Bc);
    check_cuda(cudaFuncSetAttribute(fa1_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "fa1: cudaFuncSetAttribute");
    fa1_kernel<<<dim3(B, H), dim3(Br), smem, stream>>>(Q, K, V, O, l, m, N, d, Br, Bc, 1.0f / sqrtf((float)d));
    check_cuda(cudaGetLastError(), "fa1: launch");
}

cudaFuncAttributes fa1_attributes() {
    cudaFuncAttributes a;
    check_cuda(cudaFuncGetAttributes(&a, fa1_kernel), "fa1: cudaFuncGetAttributes");
    return a;
}

int fa1_max_blocks_per_sm(int d, int Br, int Bc) {
    int n = 0;
    const size_t smem = fa1_smem_bytes(d, Br, Bc);
    check_cuda(cudaFuncSetAttribute(fa1_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "fa1: cudaFuncSetAttribute");
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fa1_kernel, Br, smem), "fa1: occupancy");
    return n;
}
