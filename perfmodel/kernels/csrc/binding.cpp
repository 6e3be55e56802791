// Python binding for the bundled kernels: thin wrappers that check tensors and pass raw pointers.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

void fa1_launch(const float*, const float*, const float*, float*, float*, float*, int, int, int, int, int, int,
                cudaStream_t);
cudaFuncAttributes fa1_attributes();
int fa1_max_blocks_per_sm(int d, int Br, int Bc);
void fa2_launch(const float*, const float*, const float*, float*, int, int, int, int, int, int, int, int,
                cudaStream_t);
cudaFuncAttributes fa2_attributes();
int fa2_max_blocks_per_sm(int d, int Br, int Bc, int threads, int pad);
void probe_dot(long long*, float*, int, int, int, int, int, int, cudaStream_t);
void probe_fma(float*, int, int, int, cudaStream_t);
void probe_exp(float*, int, int, int, cudaStream_t);
void probe_read(const float*, size_t, int, float*, int, cudaStream_t);
void probe_chase(const unsigned*, int, int, int, long long*, unsigned*, cudaStream_t);
void probe_sync(long long*, int, int, int, cudaStream_t);
void probe_empty(cudaStream_t);

static void check_qkv(const torch::Tensor& t, const char* name) {
    TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
    TORCH_CHECK(t.scalar_type() == torch::kFloat32, name, " must be float32");
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
    TORCH_CHECK(t.dim() == 4, name, " must be (B, H, N, d)");
}

static cudaStream_t stream() { return at::cuda::getCurrentCUDAStream().stream(); }

void fa1_forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, torch::Tensor l,
                 torch::Tensor m, int64_t Br, int64_t Bc) {
    for (auto* p : {&Q, &K, &V, &O}) check_qkv(*p, "fa1 operand");
    const int B = Q.size(0), H = Q.size(1), N = Q.size(2), d = Q.size(3);
    TORCH_CHECK(l.numel() == (int64_t)B * H * N && m.numel() == (int64_t)B * H * N, "l and m must hold B*H*N");
    fa1_launch(Q.data_ptr<float>(), K.data_ptr<float>(), V.data_ptr<float>(), O.data_ptr<float>(),
               l.data_ptr<float>(), m.data_ptr<float>(), B, H, N, d, (int)Br, (int)Bc, stream());
}

void fa2_forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, int64_t Br, int64_t Bc,
                 int64_t threads, int64_t pad) {
    for (auto* p : {&Q, &K, &V, &O}) check_qkv(*p, "fa2 operand");
    TORCH_CHECK(threads % 32 == 0 && threads > 0 && threads <= 1024, "threads must be a multiple of 32, <= 1024");
    fa2_launch(Q.data_ptr<float>(), K.data_ptr<float>(), V.data_ptr<float>(), O.data_ptr<float>(), Q.size(0),
               Q.size(1), Q.size(2), Q.size(3), (int)Br, (int)Bc, (int)threads, (int)pad, stream());
}

static py::dict attrs(const cudaFuncAttributes& a) {
    py::dict d;
    d["regs_per_thread"] = a.numRegs;
    d["static_smem_bytes"] = (int64_t)a.sharedSizeBytes;
    d["local_bytes"] = (int64_t)a.localSizeBytes;
    d["max_threads_per_block"] = a.maxThreadsPerBlock;
    return d;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, mod) {
    mod.def("fa1_forward", &fa1_forward);
    mod.def("fa2_forward", &fa2_forward);
    mod.def("fa1_attributes", []() { return attrs(fa1_attributes()); });
    mod.def("fa2_attributes", []() { return attrs(fa2_attributes()); });
    mod.def("fa1_max_blocks_per_sm", &fa1_max_blocks_per_sm);
    mod.def("fa2_max_blocks_per_sm", &fa2_max_blocks_per_sm);
    mod.def("probe_dot", [](torch::Tensor cycles, torch::Tensor sink, int blocks, int warps, int stride, int n,
                            int iters, int mode) {
        probe_dot((long long*)cycles.data_ptr<int64_t>(), sink.data_ptr<float>(), blocks, warps, stride, n,
                  iters, mode, stream());
    });
    mod.def("probe_fma", [](torch::Tensor sink, int blocks, int threads, int iters) {
        probe_fma(sink.data_ptr<float>(), blocks, threads, iters, stream());
    });
    mod.def("probe_exp", [](torch::Tensor sink, int blocks, int threads, int iters) {
        probe_exp(sink.data_ptr<float>(), blocks, threads, iters, stream());
    });
    mod.def("probe_read", [](torch::Tensor buf, int iters, torch::Tensor sink, int blocks) {
        probe_read(buf.data_ptr<float>(), (size_t)buf.numel(), iters, sink.data_ptr<float>(), blocks, stream());
    });
    mod.def("probe_chase", [](torch::Tensor next, int steps, bool shared, int n_shared, torch::Tensor cycles,
                              torch::Tensor sink) {
        probe_chase(reinterpret_cast<const unsigned*>(next.data_ptr<int32_t>()), steps, shared ? 1 : 0, n_shared,
                    (long long*)cycles.data_ptr<int64_t>(), reinterpret_cast<unsigned*>(sink.data_ptr<int32_t>()),
                    stream());
    });
    mod.def("probe_sync", [](torch::Tensor cycles, int blocks, int threads, int iters) {
        probe_sync((long long*)cycles.data_ptr<int64_t>(), blocks, threads, iters, stream());
    });
    mod.def("probe_empty", []() { probe_empty(stream()); });
}
