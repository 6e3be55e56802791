// Python binding for the bundled kernels: thin wrappers that check tensors and pass raw pointers.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <array>
#include <vector>

void fa1_launch(const float*, const float*, const float*, float*, float*, float*, int, int, int, int, int, int,
                cudaStream_t);
cudaFuncAttributes fa1_attributes();
int fa1_max_blocks_per_sm(int d, int Br, int Bc);
void fa2_launch(const float*, const float*, const float*, float*, int, int, int, int, int, int, int, int,
                cudaStream_t);
cudaFuncAttributes fa2_attributes();
int fa2_max_blocks_per_sm(int d, int Br, int Bc, int threads, int pad);
void fa2_tc_launch_ex(const void*, const void*, const void*, void*, int, int, int, int, int, int, int, int, int,
                      size_t, cudaStream_t);
std::vector<std::array<int, 4>> fa2_tc_instances();
cudaFuncAttributes fa2_tc_attributes(int d, int Br, int Bc, int warps, int dtype);
size_t fa2_tc_smem_bytes(int d, int Br, int Bc, int warps);
int fa2_tc_max_blocks_per_sm(int d, int Br, int Bc, int warps, int dtype, size_t extra_smem);

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

// fa2_tc: Q, K, V, O of one shape (B, H, N, d), contiguous, on one CUDA device, all fp16 or all bf16.
void fa2_tc_forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, int64_t Br, int64_t Bc,
                    int64_t warps, bool causal, int64_t extra_smem) {
    TORCH_CHECK(extra_smem >= 0, "fa2_tc: extra_smem must be >= 0, got ", extra_smem);
    const auto dt = Q.scalar_type();
    TORCH_CHECK(dt == torch::kFloat16 || dt == torch::kBFloat16, "fa2_tc: Q must be float16 or bfloat16, got ", dt);
    const char* names[4] = {"Q", "K", "V", "O"};
    const torch::Tensor* ts[4] = {&Q, &K, &V, &O};
    for (int i = 0; i < 4; ++i) {
        const torch::Tensor& t = *ts[i];
        TORCH_CHECK(t.is_cuda(), "fa2_tc: ", names[i], " must be a CUDA tensor");
        TORCH_CHECK(t.dim() == 4, "fa2_tc: ", names[i], " must be 4-D (B, H, N, d)");
        TORCH_CHECK(t.is_contiguous(), "fa2_tc: ", names[i], " must be contiguous");
        TORCH_CHECK(t.scalar_type() == dt, "fa2_tc: ", names[i], " has dtype ", t.scalar_type(), ", Q has ", dt);
        TORCH_CHECK(t.sizes() == Q.sizes(), "fa2_tc: ", names[i], " has shape ", t.sizes(), ", Q has ", Q.sizes());
        TORCH_CHECK(t.device() == Q.device(), "fa2_tc: ", names[i], " is on ", t.device(), ", Q on ", Q.device());
    }
    const c10::cuda::CUDAGuard guard(Q.device());
    fa2_tc_launch_ex(Q.data_ptr(), K.data_ptr(), V.data_ptr(), O.data_ptr(), Q.size(0), Q.size(1), Q.size(2),
                     Q.size(3), (int)Br, (int)Bc, (int)warps, dt == torch::kBFloat16 ? 1 : 0, causal ? 1 : 0,
                     (size_t)extra_smem, stream());
}

// dtype code for fa2_tc: 0 or 1, "fp16"/"float16"/"half" or "bf16"/"bfloat16", or a torch dtype.
static int fa2_tc_dtype_code(const py::object& o) {
    if (py::isinstance<py::int_>(o)) return o.cast<int>();
    std::string s = py::str(o);
    if (s.rfind("torch.", 0) == 0) s = s.substr(6);
    if (s == "fp16" || s == "float16" || s == "half") return 0;
    if (s == "bf16" || s == "bfloat16") return 1;
    throw std::invalid_argument("fa2_tc: dtype must be 0/1, 'fp16' or 'bf16', got " + s);
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
    mod.def("fa2_tc_forward", &fa2_tc_forward, "fa2_tc forward: O = softmax(Q K^T / sqrt(d)) V",
            py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("O"), py::arg("Br"), py::arg("Bc"), py::arg("warps"),
            py::arg("causal"), py::arg("extra_smem") = 0);
    mod.def("fa2_tc_instances", []() {
        py::list out;
        for (const auto& i : fa2_tc_instances()) out.append(py::make_tuple(i[0], i[1], i[2], i[3]));
        return out;
    }, "compiled fa2_tc instances as (d, Br, Bc, warps) tuples");
    mod.def("fa2_tc_attributes", [](int d, int Br, int Bc, int warps, py::object dtype) {
        py::dict a = attrs(fa2_tc_attributes(d, Br, Bc, warps, fa2_tc_dtype_code(dtype)));
        a["dynamic_smem_bytes"] = (int64_t)fa2_tc_smem_bytes(d, Br, Bc, warps);
        return a;
    }, py::arg("d"), py::arg("Br"), py::arg("Bc"), py::arg("warps"), py::arg("dtype"));
    mod.def("fa2_tc_max_blocks_per_sm", [](int d, int Br, int Bc, int warps, py::object dtype, int64_t extra_smem) {
        TORCH_CHECK(extra_smem >= 0, "fa2_tc: extra_smem must be >= 0, got ", extra_smem);
        return fa2_tc_max_blocks_per_sm(d, Br, Bc, warps, fa2_tc_dtype_code(dtype), (size_t)extra_smem);
    }, py::arg("d"), py::arg("Br"), py::arg("Bc"), py::arg("warps"), py::arg("dtype"), py::arg("extra_smem") = 0);
}
