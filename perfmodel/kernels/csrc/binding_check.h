// Refusals of the kernels' bindings (binding.cpp), raised through torch with one C-string message.
#pragma once
#include <cstdio>

#include <torch/extension.h>

// A refusal's message is formatted here with snprintf and handed to torch as one C string. On the H200 image
// (torch 2.11.0+cu130) a TORCH_CHECK whose message torch formats from several arguments ended the process with
// SIGSEGV, while one literal message raised as it should (tests/gpu: the bindings' refusal tests).
#define PM_CHECK(cond, ...)                                                 \
    do {                                                                    \
        if (!(cond)) {                                                      \
            char pm_msg_[640];                                              \
            std::snprintf(pm_msg_, sizeof pm_msg_, __VA_ARGS__);            \
            TORCH_CHECK(false, static_cast<const char*>(pm_msg_));         \
        }                                                                   \
    } while (0)

// A shape or a device as text, "(2, 4, 16, 64)" or "cuda:0", for those messages
struct Text { char s[112]; };
static Text dims(c10::IntArrayRef a) {
    Text t;
    size_t n = std::snprintf(t.s, sizeof t.s, "(");
    for (size_t i = 0; i < a.size() && n < sizeof t.s; ++i)
        n += std::snprintf(t.s + n, sizeof t.s - n, i ? ", %lld" : "%lld", (long long)a[i]);
    if (n < sizeof t.s) std::snprintf(t.s + n, sizeof t.s - n, ")");
    return t;
}
static Text device_text(const c10::Device& d) {
    Text t;
    std::snprintf(t.s, sizeof t.s, "%s:%d", d.is_cuda() ? "cuda" : "cpu", (int)d.index());
    return t;
}
static const char* dtype_name(c10::ScalarType t) { return c10::toString(t); }
