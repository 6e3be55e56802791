// fa2: FlashAttention-2 loop order, after seed 001, fp32. Grid (ceil(N/Br), B*H), block (32, W): tx = lane,
// ty = warp. One block per (Q tile, batch*head); loop over K/V tiles; O accumulated in shared memory and
// written once. Shared tiles padded by `pad` words per row: Q, K, V, O rows of dp = d + pad words, S rows of
// bcp = Bc + pad words. Tiles, d, pad and W are run-time arguments (one build for every configuration).
// perfmodel/kernels/fa2.py describes this loop nest; keep the two in step.
#include <cuda_runtime.h>
#include <math.h>
#include <stdexcept>
#include <string>

__global__ void fa2_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                           float* __restrict__ O, int N, int d, int Br, int Bc, int pad, float scale) {
    extern __shared__ float smem[];
    const int dp = d + pad, bcp = Bc + pad;
    float* Qs = smem;
    float* Ks = Qs + Br * dp;
    float* Vs = Ks + Bc * dp;
    float* Ss = Vs + Bc * dp;
    float* Os = Ss + Br * bcp;
    float* ms = Os + Br * dp;
    float* ls = ms + Br;
    float* al = ls + Br;
    const int tx = threadIdx.x, ty = threadIdx.y, W = blockDim.y;
    const int T = 32 * W, tid = ty * 32 + tx;
    const size_t bh = blockIdx.y;
    const int q0 = blockIdx.x * Br;
    const int nr = min(Br, N - q0);
    const float* Qh = Q + bh * N * d;
    const float* Kh = K + bh * N * d;
    const float* Vh = V + bh * N * d;
    float* Oh = O + bh * N * d;

    for (int r = ty; r < Br; r += W)
        for (int x = tx; x < d; x += 32) {
            Qs[r * dp + x] = (r < nr) ? Qh[(size_t)(q0 + r) * d + x] : 0.f;
            Os[r * dp + x] = 0.f;
        }
    for (int r = tid; r < Br; r += T) {
        ms[r] = -INFINITY;
        ls[r] = 0.f;
    }
    __syncthreads();

    const int Tc = (N + Bc - 1) / Bc;
    for (int j = 0; j < Tc; ++j) {
        const int kv0 = j * Bc;
        const int nc = min(Bc, N - kv0);
        // P1: K and V tiles
        for (int c = ty; c < nc; c += W)
            for (int x = tx; x < d; x += 32) {
                Ks[c * dp + x] = Kh[(size_t)(kv0 + c) * d + x];
                Vs[c * dp + x] = Vh[(size_t)(kv0 + c) * d + x];
            }
        __syncthreads();
        // P2: S = scale * Q K^T
        for (int r = ty; r < Br; r += W)
            for (int c = tx; c < nc; c += 32) {
                float s = 0.f;
                for (int x = 0; x < d; ++x) s += Qs[r * dp + x] * Ks[c * dp + x];
                Ss[r * bcp + c] = s * scale;
            }
        __syncthreads();
        // P3: row max, rescale factor
        for (int r = tid; r < Br; r += T) {
            const float mo = ms[r];
            float mx = mo;
            for (int c = 0; c < nc; ++c) mx = fmaxf(mx, Ss[r * bcp + c]);
            al[r] = __expf(mo - mx);
            ms[r] = mx;
        }
        __syncthreads();
        // P4: P = exp(S - m)
        for (int r = ty; r < Br; r += W) {
            const float mr = ms[r];
            for (int c = tx; c < nc; c += 32) Ss[r * bcp + c] = __expf(Ss[r * bcp + c] - mr);
        }
        __syncthreads();
        // P5: row sums
        for (int r = tid; r < Br; r += T) {
            float sum = 0.f;
            for (int c = 0; c < nc; ++c) sum += Ss[r * bcp + c];
            ls[r] = ls[r] * al[r] + sum;
        }
        // P6: O = alpha * O + P V
        for (int r = ty; r < Br; r += W) {
            const float a = al[r];
            for (int x = tx; x < d; x += 32) {
                float acc = 0.f;
                for (int c = 0; c < nc; ++c) acc += Ss[r * bcp + c] * Vs[c * dp + x];
                Os[r * dp + x] = a * Os[r * dp + x] + acc;
            }
        }
        __syncthreads();
    }
    for (int r = ty; r < nr; r += W) {
        const float inv = __fdividef(1.0f, ls[r]);
        for (int x = tx; x < d; x += 32) Oh[(size_t)(q0 + r) * d + x] = Os[r * dp + x] * inv;
    }
}

static void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

size_t fa2_smem_bytes(int d, int Br, int Bc, int pad) {
    const int dp = d + pad, bcp = Bc + pad;
    return (size_t)(2 * Br * dp + 2 * Bc * dp + Br * bcp + 3 * Br) * sizeof(float);
}

void fa2_launch(const float* Q, const float* K, const float* V, float* O, int B, int H, int N, int d, int Br,
                int Bc, int threads, int pad, cudaStream_t stream) {
    const size_t smem = fa2_smem_bytes(d, Br, Bc, pad);
    check_cuda(cudaFuncSetAttribute(fa2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "fa2: cudaFuncSetAttribute");
    dim3 grid((N + Br - 1) / Br, B * H);
    fa2_kernel<<<grid, dim3(32, threads / 32), smem, stream>>>(Q, K, V, O, N, d, Br, Bc, pad,
                                                               1.0f / sqrtf((float)d));
    check_cuda(cudaGetLastError(), "fa2: launch");
}

cudaFuncAttributes fa2_attributes() {
    cudaFuncAttributes a;
    check_cuda(cudaFuncGetAttributes(&a, fa2_kernel), "fa2: cudaFuncGetAttributes");
    return a;
}

int fa2_max_blocks_per_sm(int d, int Br, int Bc, int threads, int pad) {
    int n = 0;
    const size_t smem = fa2_smem_bytes(d, Br, Bc, pad);
    check_cuda(cudaFuncSetAttribute(fa2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "fa2: cudaFuncSetAttribute");
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fa2_kernel, threads, smem), "fa2: occupancy");
    return n;
}
