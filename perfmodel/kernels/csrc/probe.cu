// Microbenchmarks for `perfmodel probe`. Each measures one constant of the timing model on the GPU at hand.
// Cycle counts come from clock64() inside the kernel (SM clock), bandwidths from CUDA events on the host.
#include <cuda_runtime.h>
#include <math.h>
#include <stdexcept>
#include <string>

static void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The kernels' inner steps, on shared memory with run-time loop bounds as in fa1/fa2. One block per SM, W warps;
// cycles of the whole block. mode 0, dot:  sum += A[lane*stride + x] * Bv[x]   (Q K^T, P V)
//                            mode 1, reduction: m = fmaxf(m, A[lane*stride + x])   (row max / row sum)
//                            mode 2, exp:  A[lane*stride + x] = __expf(A[lane*stride + x] - m)   (P = exp(S - m))
__global__ void probe_dot_kernel(long long* cycles, float* sink, int stride, int n, int iters, int mode) {
    extern __shared__ float sm[];
    float* A = sm;
    float* Bv = sm + 32 * stride + n;
    const int lane = threadIdx.x & 31;
    for (int i = threadIdx.x; i < 32 * stride + 2 * n; i += blockDim.x) sm[i] = 1e-3f * (i % 7);
    __syncthreads();
    const long long t0 = clock64();
    float sum = 0.f;
    if (mode == 0) {
        for (int it = 0; it < iters; ++it)
            for (int x = 0; x < n; ++x) sum += A[lane * stride + x] * Bv[x];
    } else if (mode == 1) {
        sum = -INFINITY;
        for (int it = 0; it < iters; ++it)
            for (int x = 0; x < n; ++x) sum = fmaxf(sum, A[lane * stride + x]);
    } else {
        const float m = Bv[0];
        for (int it = 0; it < iters; ++it)
            for (int x = 0; x < n; ++x) A[lane * stride + x] = __expf(A[lane * stride + x] - m);
    }
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    if (sum == 12345.f) sink[0] = sum;
}

// 8 independent FMA chains per thread.
__global__ void probe_fma_kernel(float* sink, int iters) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = threadIdx.x * 1e-3f + k;
    const float b = 0.999f, c = 1e-4f;
    for (int it = 0; it < iters; ++it)
#pragma unroll
        for (int k = 0; k < 8; ++k) a[k] = fmaf(a[k], b, c);
    float s = 0.f;
    for (int k = 0; k < 8; ++k) s += a[k];
    if (s == 12345.f) sink[0] = s;
}

// 8 independent exp chains per thread (__expf: FMUL + MUFU.EX2).
__global__ void probe_exp_kernel(float* sink, int iters) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = -1e-3f * (threadIdx.x + k);
    for (int it = 0; it < iters; ++it)
#pragma unroll
        for (int k = 0; k < 8; ++k) a[k] = __expf(a[k]) - 1.0f;
    float s = 0.f;
    for (int k = 0; k < 8; ++k) s += a[k];
    if (s == 12345.f) sink[0] = s;
}

// Read a buffer (resident in L2) `iters` times with 16-byte loads.
__global__ void probe_read_kernel(const float4* __restrict__ buf, size_t n4, int iters, float* sink) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (int it = 0; it < iters; ++it)
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += step) {
            const float4 v = buf[i];
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
    if (acc.x + acc.y + acc.z + acc.w == 12345.f) sink[0] = acc.x;
}

// Pointer chase by one thread: cycles per dependent load. In shared memory when `shared`, else global.
__global__ void probe_chase_kernel(const unsigned* __restrict__ next, int steps, int shared, int n_shared,
                                   long long* cycles, unsigned* sink) {
    extern __shared__ unsigned snext[];
    if (shared) {
        for (int i = threadIdx.x; i < n_shared; i += blockDim.x) snext[i] = next[i];
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    unsigned p = 0;
    // warm the path once
    for (int s = 0; s < 64; ++s) p = shared ? snext[p] : __ldcg(next + p);
    p = 0;
    const long long t0 = clock64();
    for (int s = 0; s < steps; ++s) p = shared ? snext[p] : __ldcg(next + p);
    const long long t1 = clock64();
    cycles[0] = t1 - t0;
    sink[0] = p;
}

// __syncthreads cost in a block of `blockDim.x` threads.
__global__ void probe_sync_kernel(long long* cycles, int iters) {
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

__global__ void probe_empty_kernel() {}

void probe_dot(long long* cycles, float* sink, int blocks, int warps, int stride, int n, int iters, int mode,
               cudaStream_t s) {
    const size_t smem = (size_t)(32 * stride + 2 * n) * sizeof(float);
    check_cuda(cudaFuncSetAttribute(probe_dot_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "probe_dot: attribute");
    probe_dot_kernel<<<blocks, 32 * warps, smem, s>>>(cycles, sink, stride, n, iters, mode);
    check_cuda(cudaGetLastError(), "probe_dot: launch");
}

void probe_fma(float* sink, int blocks, int threads, int iters, cudaStream_t s) {
    probe_fma_kernel<<<blocks, threads, 0, s>>>(sink, iters);
    check_cuda(cudaGetLastError(), "probe_fma: launch");
}

void probe_exp(float* sink, int blocks, int threads, int iters, cudaStream_t s) {
    probe_exp_kernel<<<blocks, threads, 0, s>>>(sink, iters);
    check_cuda(cudaGetLastError(), "probe_exp: launch");
}

void probe_read(const float* buf, size_t n_floats, int iters, float* sink, int blocks, cudaStream_t s) {
    probe_read_kernel<<<blocks, 256, 0, s>>>(reinterpret_cast<const float4*>(buf), n_floats / 4, iters, sink);
    check_cuda(cudaGetLastError(), "probe_read: launch");
}

void probe_chase(const unsigned* next, int steps, int shared, int n_shared, long long* cycles, unsigned* sink,
                 cudaStream_t s) {
    const size_t smem = shared ? (size_t)n_shared * sizeof(unsigned) : 0;
    check_cuda(cudaFuncSetAttribute(probe_chase_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "probe_chase: attribute");
    probe_chase_kernel<<<1, shared ? 256 : 32, smem, s>>>(next, steps, shared, n_shared, cycles, sink);
    check_cuda(cudaGetLastError(), "probe_chase: launch");
}

void probe_sync(long long* cycles, int blocks, int threads, int iters, cudaStream_t s) {
    probe_sync_kernel<<<blocks, threads, 0, s>>>(cycles, iters);
    check_cuda(cudaGetLastError(), "probe_sync: launch");
}

void probe_empty(cudaStream_t s) {
    probe_empty_kernel<<<1, 32, 0, s>>>();
    check_cuda(cudaGetLastError(), "probe_empty: launch");
}
