// Python binding for `perfmodel probe`'s microbenchmarks (probe.cu), built as their own extension module
// (perfmodel/measure/build.py load_probe), apart from the kernels': thin wrappers that pass raw pointers.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

void probe_dot(long long*, float*, int, int, int, int, int, int, cudaStream_t);
void probe_fma(float*, int, int, int, cudaStream_t);
void probe_exp(float*, int, int, int, cudaStream_t);
void probe_read(const float*, size_t, int, float*, int, cudaStream_t);
void probe_l2_read(const float*, size_t, int, float*, int, cudaStream_t);
void probe_reuse(float*, size_t, int, int, const float*, size_t, float*, int, cudaStream_t);
void probe_chase(const unsigned*, int, int, int, long long*, unsigned*, cudaStream_t);
void probe_sync(long long*, int, int, int, cudaStream_t);
void probe_empty(cudaStream_t);
void probe_red(float*, int, int, int, int, int, cudaStream_t);
void probe_mma(long long*, float*, int, int, int, int, int, cudaStream_t);
void probe_mix(long long*, float*, int, int, int, int, int, int, int, int, cudaStream_t);
void probe_fill(long long*, float*, const void*, int, int, int, int, int, cudaStream_t);
void probe_clock(long long*, long long, int, cudaStream_t);
void probe_ldsm(long long*, unsigned*, int, int, int, int, int, int, cudaStream_t);
void probe_crowd(long long*, const void*, int, int, int, int, int, int, int, cudaStream_t);

static cudaStream_t stream() { return at::cuda::getCurrentCUDAStream().stream(); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, mod) {
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
    mod.def("probe_l2_read", [](torch::Tensor buf, int iters, torch::Tensor sink, int blocks) {
        probe_l2_read(buf.data_ptr<float>(), (size_t)buf.numel(), iters, sink.data_ptr<float>(), blocks, stream());
    });
    // buf: blocks x live floats, each block's own; extra: iters x blocks x stream floats, each read once
    mod.def("probe_reuse", [](torch::Tensor buf, int64_t live, int iters, bool write, torch::Tensor extra,
                              int64_t stream_floats, torch::Tensor sink, int blocks) {
        TORCH_CHECK(buf.numel() >= (int64_t)blocks * live && live % 4 == 0 && stream_floats % 4 == 0,
                    "probe_reuse: buffer sizes");
        TORCH_CHECK(extra.numel() >= (int64_t)iters * blocks * stream_floats, "probe_reuse: stream buffer size");
        probe_reuse(buf.data_ptr<float>(), (size_t)live, iters, write ? 1 : 0, extra.data_ptr<float>(),
                    (size_t)stream_floats, sink.data_ptr<float>(), blocks, stream());
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
    // buf: (blocks / share) regions of ``region`` floats; vec 1 or 2 floats a lane a step
    mod.def("probe_red", [](torch::Tensor buf, int blocks, int region, int share, int iters, int vec) {
        TORCH_CHECK(share >= 1 && region % (256 * vec) == 0 && (vec == 1 || vec == 2), "probe_red: share, region, vec");
        TORCH_CHECK(buf.numel() >= (int64_t)((blocks + share - 1) / share) * region, "probe_red: buffer size");
        probe_red(buf.data_ptr<float>(), blocks, region, share, iters, vec, stream());
    });
    mod.def("probe_mma", [](torch::Tensor cycles, torch::Tensor sink, int blocks, int warps, int iters, int dtype,
                            int chains) {
        probe_mma((long long*)cycles.data_ptr<int64_t>(), sink.data_ptr<float>(), blocks, warps, iters, dtype, chains,
                  stream());
    });
    // trans: ldmatrix .trans; random_operands: switching random operands (the power probe)
    mod.def("probe_mix", [](torch::Tensor cycles, torch::Tensor sink, int blocks, int warps, int iters, int n_mma,
                            int n_ldsm, int n_ex2, int n_ffma, bool trans, bool random_operands) {
        probe_mix((long long*)cycles.data_ptr<int64_t>(), sink.data_ptr<float>(), blocks, warps, iters, n_mma, n_ldsm,
                  n_ex2, n_ffma, (trans ? 1 : 0) | (random_operands ? 2 : 0), stream());
    }, py::arg("cycles"), py::arg("sink"), py::arg("blocks"), py::arg("warps"), py::arg("iters"), py::arg("n_mma"),
       py::arg("n_ldsm"), py::arg("n_ex2"), py::arg("n_ffma"), py::arg("trans"), py::arg("random_operands") = false);
    mod.def("probe_fill", [](torch::Tensor cycles, torch::Tensor sink, torch::Tensor src, int blocks, int warps,
                             int iters, int n_ldsm, int n_cp) {
        TORCH_CHECK(src.numel() * src.element_size() >= (int64_t)blocks * 65536, "probe_fill: src under 64 KB a block");
        probe_fill((long long*)cycles.data_ptr<int64_t>(), sink.data_ptr<float>(), src.data_ptr(), blocks, warps, iters,
                   n_ldsm, n_cp, stream());
    });
    mod.def("probe_clock", [](torch::Tensor out, int64_t cycles, int slot) {
        TORCH_CHECK(out.numel() >= 2 * (int64_t)(slot + 1), "probe_clock: out holds fewer slots");
        probe_clock((long long*)out.data_ptr<int64_t>(), cycles, slot, stream());
    });
    mod.def("probe_ldsm", [](torch::Tensor cycles, torch::Tensor sink, int blocks, int warps, int iters, int chains,
                             bool trans, bool same) {
        TORCH_CHECK(chains >= 1 && chains <= 8 && warps >= 1 && warps <= 32, "probe_ldsm: chains 1-8, warps 1-32");
        TORCH_CHECK(cycles.numel() >= blocks, "probe_ldsm: cycles holds fewer blocks");
        probe_ldsm((long long*)cycles.data_ptr<int64_t>(), reinterpret_cast<unsigned*>(sink.data_ptr<int32_t>()),
                   blocks, warps, iters, chains, trans ? 1 : 0, same ? 1 : 0, stream());
    });
    mod.def("probe_crowd", [](torch::Tensor cycles, torch::Tensor src, int blocks, int threads, int iters,
                              int tile_bytes, bool shared, int spin, int ring) {
        TORCH_CHECK(tile_bytes % 16 == 0 && tile_bytes <= 160 * 1024, "probe_crowd: tile_bytes");
        TORCH_CHECK(ring >= 1 && threads >= 32 && threads <= 1024, "probe_crowd: ring, threads");
        TORCH_CHECK(cycles.numel() >= blocks, "probe_crowd: cycles holds fewer blocks");
        TORCH_CHECK(src.numel() * src.element_size() >= (int64_t)(shared ? 1 : blocks) * ring * tile_bytes,
                    "probe_crowd: src under a ring of tiles a block");
        probe_crowd((long long*)cycles.data_ptr<int64_t>(), src.data_ptr(), blocks, threads, iters, tile_bytes,
                    shared ? 1 : 0, spin, ring, stream());
    });
}
