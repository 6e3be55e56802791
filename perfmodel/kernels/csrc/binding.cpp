// Python binding for the bundled kernels: thin wrappers that check tensors and pass raw pointers.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <array>
#include <vector>

#include "binding_check.h"

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
void fa2_tc_launch_ex2(const void*, const void*, const void*, void*, int, int, int, int, int, int, int, int, int,
                       int, int, float*, int, float*, float*, size_t, cudaStream_t);
std::vector<std::array<int, 4>> fa2_tc_instances();
std::vector<std::array<int, 4>> fa2_tc_splitkv_instances();
cudaFuncAttributes fa2_tc_attributes(int d, int Br, int Bc, int warps, int dtype);
size_t fa2_tc_smem_bytes(int d, int Br, int Bc, int warps);
int fa2_tc_max_blocks_per_sm(int d, int Br, int Bc, int warps, int dtype, size_t extra_smem);

// ---- fa2_tc_bwd (begin): the tensor-core backward (fa2_tc_bwd.cu); one block, registered by fa2_tc_bwd_defs ----
void fa2_tc_bwd_launch(const void*, const void*, const void*, const void*, const void*, const float*, void*, void*,
                       void*, float*, float*, int, int, int, int, int, int, int, int, int, int, int, cudaStream_t);
std::vector<std::array<int, 4>> fa2_tc_bwd_instances();
cudaFuncAttributes fa2_tc_bwd_attributes(int d, int Bc, int Br, int warps, int dtype);
size_t fa2_tc_bwd_smem_bytes(int d, int Bc, int Br, int warps);

// dQ, dK, dV of softmax(Q K^T / sqrt(d)) V (causal: bottom-right aligned). Q, O, dO, dQ (B, H, Nq, d); K, V, dK, dV
// (B, Hkv, Nk, d); LSE (B, H, Nq) fp32 natural log; workspaces dQ_accum (B, H, Nq, d) and D (B, H, Nq), fp32.
void fa2_tc_backward(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, torch::Tensor dO,
                     torch::Tensor LSE, torch::Tensor dQ, torch::Tensor dK, torch::Tensor dV, torch::Tensor dQ_accum,
                     torch::Tensor D, int64_t Bc, int64_t Br, int64_t warps, bool causal) {
    const auto dt = Q.scalar_type();
    PM_CHECK(dt == torch::kFloat16 || dt == torch::kBFloat16, "fa2_tc_bwd: Q must be float16 or bfloat16, got %s",
             dtype_name(dt));
    PM_CHECK(Q.dim() == 4, "fa2_tc_bwd: Q must be 4-D (B, H, Nq, d), got %s", dims(Q.sizes()).s);
    PM_CHECK(K.dim() == 4, "fa2_tc_bwd: K must be 4-D (B, Hkv, Nk, d), got %s", dims(K.sizes()).s);
    const int64_t B = Q.size(0), H = Q.size(1), Nq = Q.size(2), d = Q.size(3), Hkv = K.size(1), Nk = K.size(2);
    PM_CHECK(K.size(0) == B && K.size(3) == d, "fa2_tc_bwd: K has shape %s, Q has %s", dims(K.sizes()).s,
             dims(Q.sizes()).s);
    PM_CHECK(Hkv >= 1 && H % Hkv == 0, "fa2_tc_bwd: H (%lld) must be a multiple of K's heads (%lld)", (long long)H,
             (long long)Hkv);
    const char* names[9] = {"Q", "K", "V", "O", "dO", "dQ", "dK", "dV", "dQ_accum"};
    const torch::Tensor* ts[9] = {&Q, &K, &V, &O, &dO, &dQ, &dK, &dV, &dQ_accum};
    for (int i = 0; i < 9; ++i) {
        const torch::Tensor& t = *ts[i];
        const bool kv = i == 1 || i == 2 || i == 6 || i == 7;
        const auto want = i == 8 ? torch::kFloat32 : dt;
        PM_CHECK(t.is_cuda(), "fa2_tc_bwd: %s must be a CUDA tensor", names[i]);
        PM_CHECK(t.device() == Q.device(), "fa2_tc_bwd: %s is on %s, Q on %s", names[i], device_text(t.device()).s,
                 device_text(Q.device()).s);
        PM_CHECK(t.is_contiguous(), "fa2_tc_bwd: %s must be contiguous", names[i]);
        PM_CHECK(t.scalar_type() == want, "fa2_tc_bwd: %s has dtype %s, want %s", names[i], dtype_name(t.scalar_type()),
                 dtype_name(want));
        PM_CHECK(t.sizes() == (kv ? K.sizes() : Q.sizes()), "fa2_tc_bwd: %s has shape %s, want %s", names[i],
                 dims(t.sizes()).s, dims(kv ? K.sizes() : Q.sizes()).s);
    }
    const char* vnames[2] = {"LSE", "D"};
    const torch::Tensor* vs[2] = {&LSE, &D};
    for (int i = 0; i < 2; ++i) {
        const torch::Tensor& t = *vs[i];
        PM_CHECK(t.is_cuda() && t.device() == Q.device(), "fa2_tc_bwd: %s must be on %s", vnames[i], device_text(Q.device()).s);
        PM_CHECK(t.is_contiguous(), "fa2_tc_bwd: %s must be contiguous", vnames[i]);
        PM_CHECK(t.scalar_type() == torch::kFloat32, "fa2_tc_bwd: %s must be float32, got %s", vnames[i],
                 dtype_name(t.scalar_type()));
        PM_CHECK(t.dim() == 3 && t.size(0) == B && t.size(1) == H && t.size(2) == Nq,
                 "fa2_tc_bwd: %s must be (B, H, Nq) = (%lld, %lld, %lld), got %s", vnames[i], (long long)B, (long long)H,
                 (long long)Nq, dims(t.sizes()).s);
    }
    const c10::cuda::CUDAGuard guard(Q.device());
    fa2_tc_bwd_launch(Q.data_ptr(), K.data_ptr(), V.data_ptr(), O.data_ptr(), dO.data_ptr(), LSE.data_ptr<float>(),
                      dQ.data_ptr(), dK.data_ptr(), dV.data_ptr(), dQ_accum.data_ptr<float>(), D.data_ptr<float>(),
                      (int)B, (int)H, (int)Hkv, (int)Nq, (int)Nk, (int)d, (int)Bc, (int)Br, (int)warps,
                      dt == torch::kBFloat16 ? 1 : 0, causal ? 1 : 0, at::cuda::getCurrentCUDAStream().stream());
}

static void fa2_tc_bwd_defs(py::module_& mod) {
    mod.def("fa2_tc_backward", &fa2_tc_backward,
            "fa2_tc backward: dQ, dK, dV of softmax(Q K^T / sqrt(d)) V (three launches on the current stream)",
            py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("O"), py::arg("dO"), py::arg("LSE"), py::arg("dQ"),
            py::arg("dK"), py::arg("dV"), py::arg("dQ_accum"), py::arg("D"), py::arg("Bc"), py::arg("Br"),
            py::arg("warps"), py::arg("causal"));
    mod.def("fa2_tc_bwd_instances", []() {
        py::list out;
        for (const auto& i : fa2_tc_bwd_instances()) out.append(py::make_tuple(i[0], i[1], i[2], i[3]));
        return out;
    }, "compiled fa2_tc backward instances as (d, Bc, Br, warps) tuples");
    mod.def("fa2_tc_bwd_attributes", [](int d, int Bc, int Br, int warps, py::object dtype) {
        std::string s = py::str(dtype);
        if (s.rfind("torch.", 0) == 0) s = s.substr(6);
        const int code = py::isinstance<py::int_>(dtype) ? dtype.cast<int>()
                         : (s == "fp16" || s == "float16" || s == "half") ? 0
                         : (s == "bf16" || s == "bfloat16") ? 1 : -1;
        PM_CHECK(code == 0 || code == 1, "fa2_tc_bwd: dtype must be 0/1, 'fp16' or 'bf16', got %.64s", s.c_str());
        const cudaFuncAttributes a = fa2_tc_bwd_attributes(d, Bc, Br, warps, code);
        py::dict r;
        r["regs_per_thread"] = a.numRegs;
        r["static_smem_bytes"] = (int64_t)a.sharedSizeBytes;
        r["local_bytes"] = (int64_t)a.localSizeBytes;
        r["max_threads_per_block"] = a.maxThreadsPerBlock;
        r["dynamic_smem_bytes"] = (int64_t)fa2_tc_bwd_smem_bytes(d, Bc, Br, warps);
        return r;
    }, py::arg("d"), py::arg("Bc"), py::arg("Br"), py::arg("warps"), py::arg("dtype"));
}
// ---- fa2_tc_bwd (end) ----

static void check_qkv(const torch::Tensor& t, const char* name) {
    PM_CHECK(t.is_cuda(), "%s must be a CUDA tensor", name);
    PM_CHECK(t.scalar_type() == torch::kFloat32, "%s must be float32", name);
    PM_CHECK(t.is_contiguous(), "%s must be contiguous", name);
    PM_CHECK(t.dim() == 4, "%s must be (B, H, N, d)", name);
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

// fa2_tc: Q and O (B, H, Nq, d), K and V (B, Hkv, Nk, d), H a multiple of Hkv (query head h reads K/V head
// h / (H/Hkv)), contiguous, on one CUDA device, all fp16 or all bf16. causal: query i sees keys j <= i + Nk - Nq
// (bottom-right); a row that sees no key gets O = 0. lse: optional fp32 (B, H, Nq) output, the natural-log
// log-sum-exp of each row's scaled scores (+inf for a row that sees no key). splits > 1: split-KV, with fp32
// workspaces o_part (splits, B, H, Nq, d) and lse_part (splits, B, H, Nq), then a combine kernel. Anything but
// the square, one-split, no-LSE problem needs an instance of fa2_tc_splitkv_instances().
static void fa2_tc_check_f32(const torch::Tensor& t, const char* name, c10::IntArrayRef shape, const torch::Tensor& Q) {
    PM_CHECK(t.is_cuda() && t.device() == Q.device(), "fa2_tc: %s must be on %s", name, device_text(Q.device()).s);
    PM_CHECK(t.scalar_type() == torch::kFloat32, "fa2_tc: %s must be float32, got %s", name,
             dtype_name(t.scalar_type()));
    PM_CHECK(t.is_contiguous(), "fa2_tc: %s must be contiguous", name);
    PM_CHECK(t.sizes() == shape, "fa2_tc: %s has shape %s, expected %s", name, dims(t.sizes()).s, dims(shape).s);
}

void fa2_tc_forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V, torch::Tensor O, int64_t Br, int64_t Bc,
                    int64_t warps, bool causal, int64_t extra_smem, int64_t splits, std::optional<torch::Tensor> lse,
                    std::optional<torch::Tensor> o_part, std::optional<torch::Tensor> lse_part) {
    PM_CHECK(extra_smem >= 0, "fa2_tc: extra_smem must be >= 0, got %lld", (long long)extra_smem);
    PM_CHECK(splits >= 1, "fa2_tc: splits must be >= 1, got %lld", (long long)splits);
    const auto dt = Q.scalar_type();
    PM_CHECK(dt == torch::kFloat16 || dt == torch::kBFloat16, "fa2_tc: Q must be float16 or bfloat16, got %s",
             dtype_name(dt));
    const char* names[4] = {"Q", "K", "V", "O"};
    const torch::Tensor* ts[4] = {&Q, &K, &V, &O};
    for (int i = 0; i < 4; ++i) {
        const torch::Tensor& t = *ts[i];
        PM_CHECK(t.is_cuda(), "fa2_tc: %s must be a CUDA tensor", names[i]);
        PM_CHECK(t.dim() == 4, "fa2_tc: %s must be 4-D (B, H, N, d)", names[i]);
        PM_CHECK(t.is_contiguous(), "fa2_tc: %s must be contiguous", names[i]);
        PM_CHECK(t.scalar_type() == dt, "fa2_tc: %s has dtype %s, Q has %s", names[i], dtype_name(t.scalar_type()),
                 dtype_name(dt));
        PM_CHECK(t.device() == Q.device(), "fa2_tc: %s is on %s, Q on %s", names[i], device_text(t.device()).s,
                 device_text(Q.device()).s);
    }
    const int64_t B = Q.size(0), H = Q.size(1), Nq = Q.size(2), d = Q.size(3), Hkv = K.size(1), Nk = K.size(2);
    PM_CHECK(O.sizes() == Q.sizes(), "fa2_tc: O has shape %s, Q has %s", dims(O.sizes()).s, dims(Q.sizes()).s);
    PM_CHECK(K.size(0) == B && K.size(3) == d, "fa2_tc: K has shape %s, expected (%lld, Hkv, Nk, %lld)",
             dims(K.sizes()).s, (long long)B, (long long)d);
    PM_CHECK(V.sizes() == K.sizes(), "fa2_tc: V has shape %s, K has %s", dims(V.sizes()).s, dims(K.sizes()).s);
    PM_CHECK(Hkv >= 1 && H % Hkv == 0, "fa2_tc: H=%lld is not a multiple of Hkv=%lld", (long long)H, (long long)Hkv);
    float* lse_p = nullptr;
    float* op = nullptr;
    float* lp = nullptr;
    if (lse.has_value() && lse->defined()) {
        fa2_tc_check_f32(*lse, "lse", {B, H, Nq}, Q);
        lse_p = lse->data_ptr<float>();
    }
    if (splits > 1) {
        TORCH_CHECK(o_part.has_value() && o_part->defined() && lse_part.has_value() && lse_part->defined(),
                    "fa2_tc: splits > 1 needs o_part (splits, B, H, Nq, d) and lse_part (splits, B, H, Nq), fp32");
        fa2_tc_check_f32(*o_part, "o_part", {splits, B, H, Nq, d}, Q);
        fa2_tc_check_f32(*lse_part, "lse_part", {splits, B, H, Nq}, Q);
        op = o_part->data_ptr<float>();
        lp = lse_part->data_ptr<float>();
    }
    const c10::cuda::CUDAGuard guard(Q.device());
    fa2_tc_launch_ex2(Q.data_ptr(), K.data_ptr(), V.data_ptr(), O.data_ptr(), (int)B, (int)H, (int)Hkv, (int)Nq,
                      (int)Nk, (int)d, (int)Br, (int)Bc, (int)warps, dt == torch::kBFloat16 ? 1 : 0, causal ? 1 : 0,
                      lse_p, (int)splits, op, lp, (size_t)extra_smem, stream());
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
    mod.def("fa2_tc_forward", &fa2_tc_forward,
            "fa2_tc forward: O = softmax(Q K^T / sqrt(d)) V; Q, O (B, H, Nq, d), K, V (B, Hkv, Nk, d); causal "
            "bottom-right; lse: optional fp32 (B, H, Nq) output; splits > 1: split-KV into the fp32 workspaces "
            "o_part (splits, B, H, Nq, d) and lse_part (splits, B, H, Nq), then combined",
            py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("O"), py::arg("Br"), py::arg("Bc"), py::arg("warps"),
            py::arg("causal"), py::arg("extra_smem") = 0, py::kw_only(), py::arg("splits") = 1,
            py::arg("lse") = py::none(), py::arg("o_part") = py::none(), py::arg("lse_part") = py::none());
    mod.def("fa2_tc_splitkv_instances", []() {
        py::list out;
        for (const auto& i : fa2_tc_splitkv_instances()) out.append(py::make_tuple(i[0], i[1], i[2], i[3]));
        return out;
    }, "(d, Br, Bc, warps) of fa2_tc's inference kernel: grouped K/V heads, Nq != Nk, lse and splits > 1");
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
        PM_CHECK(extra_smem >= 0, "fa2_tc: extra_smem must be >= 0, got %lld", (long long)extra_smem);
        return fa2_tc_max_blocks_per_sm(d, Br, Bc, warps, fa2_tc_dtype_code(dtype), (size_t)extra_smem);
    }, py::arg("d"), py::arg("Br"), py::arg("Bc"), py::arg("warps"), py::arg("dtype"), py::arg("extra_smem") = 0);
    fa2_tc_bwd_defs(mod);
}
