// Blas: cuBLAS through dlopen. See cuda_blas.h.
#include "backends/cuda/cuda_blas.h"

#include <dlfcn.h>
#include <library_types.h>

#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_launch.h"
#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

// cublas_api.h's values (the same in CUDA 12 and 13).
constexpr int kStatusSuccess = 0;
constexpr int kOpN = 0;
constexpr int kOpT = 1;
constexpr int kPointerModeDevice = 1;
constexpr int kCompute32F = 68;
constexpr int kGemmDefault = -1;

using Status = int;
using Handle = void*;

}  // namespace

struct Blas::Api {
    Status (*create)(Handle*) = nullptr;
    Status (*set_stream)(Handle, cudaStream_t) = nullptr;
    Status (*set_workspace)(Handle, void*, size_t) = nullptr;
    Status (*set_pointer_mode)(Handle, int) = nullptr;
    Status (*gemm_ex)(Handle, int, int, int, int, int, const void*, const void*, cudaDataType, int, const void*,
                      cudaDataType, int, const void*, void*, cudaDataType, int, int, int) = nullptr;
    std::string library;
    std::string error;  // why it is unusable; empty when loaded
};

namespace {

template <class F>
bool bind(void* lib, const char* symbol, F* out) {
    *out = reinterpret_cast<F>(dlsym(lib, symbol));
    return *out != nullptr;
}

// Loaded once per process and never unloaded (handles of any backend may still use it).
const Blas::Api& api() {
    static Blas::Api a;
    static std::once_flag once;
    std::call_once(once, [] {
        void* lib = nullptr;
        for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
            lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (lib) {
                a.library = name;
                break;
            }
        }
        if (!lib) {
            const char* e = dlerror();
            a.error = std::string("libcublas.so.13 not found (") + (e ? e : "dlopen failed") + ")";
            return;
        }
        const bool ok = bind(lib, "cublasCreate_v2", &a.create) && bind(lib, "cublasSetStream_v2", &a.set_stream) &&
                        bind(lib, "cublasSetWorkspace_v2", &a.set_workspace) &&
                        bind(lib, "cublasSetPointerMode_v2", &a.set_pointer_mode) &&
                        bind(lib, "cublasGemmEx", &a.gemm_ex);
        if (!ok) a.error = a.library + " lacks a cuBLAS function this backend calls";
    });
    return a;
}

// Handles given back by a Blas, per device (see cuda_blas.h: never destroyed).
std::mutex g_pool_mutex;
std::vector<std::pair<int, Handle>> g_pool;

Handle take_pooled(int device) {
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    for (size_t i = 0; i < g_pool.size(); ++i) {
        if (g_pool[i].first != device) continue;
        const Handle h = g_pool[i].second;
        g_pool.erase(g_pool.begin() + static_cast<std::ptrdiff_t>(i));
        return h;
    }
    return nullptr;
}

// What enqueue_call carries: everything one cublasGemmEx needs, as plain bytes.
struct GemmParams {
    const Blas::Api* api;
    Handle handle;
    float* y;
    const void* w;
    const void* x;
    const float* alpha;
    const float* beta;
    void* workspace;
    uint64_t workspace_bytes;
    int32_t m, n, k, ldy, ldw, pad;
};

int as_int(size_t v, const char* what) {
    if (v > 0x7fffffffu) fail("cuBLAS product: %s %zu is too large", what, v);
    return static_cast<int>(v);
}

}  // namespace

std::unique_ptr<Blas> Blas::open(int device, void* workspace, size_t workspace_bytes, std::string* why) {
    const Api& a = api();
    if (!a.error.empty()) {
        *why = a.error;
        return nullptr;
    }
    std::unique_ptr<Blas> b(new Blas());
    b->api_ = &a;
    b->device_ = device;
    b->workspace_ = workspace;
    b->workspace_bytes_ = workspace_bytes;
    b->handle_ = take_pooled(device);
    Status st = kStatusSuccess;
    if (!b->handle_) st = a.create(&b->handle_);
    if (st != kStatusSuccess) {
        b->handle_ = nullptr;
        *why = "cublasCreate failed (status " + std::to_string(st) + ")";
        return nullptr;
    }
    // Device-side alpha and beta: a step graph keeps the addresses, the values may change. The
    // workspace is set with each call (enqueue).
    st = a.set_pointer_mode(b->handle_, kPointerModeDevice);
    if (st != kStatusSuccess) {
        *why = "cuBLAS handle set-up failed (status " + std::to_string(st) + ")";
        return nullptr;
    }
    return b;
}

Blas::~Blas() {
    if (!handle_) return;
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    g_pool.emplace_back(device_, handle_);
}

void Blas::enqueue(cudaStream_t s, const void* bytes) {
    GemmParams p{};
    std::memcpy(&p, bytes, sizeof(p));
    // cublasSetStream also puts the handle back on cuBLAS's own workspace pool: ours is set again,
    // so that nothing is allocated while a step graph captures the call.
    Status st = p.api->set_stream(p.handle, s);
    if (st == kStatusSuccess) st = p.api->set_workspace(p.handle, p.workspace, p.workspace_bytes);
    // Column-major view: y^T [m, n] = op_T(w^T [k, m]) x^T [k, n].
    if (st == kStatusSuccess) {
        st = p.api->gemm_ex(p.handle, kOpT, kOpN, p.m, p.n, p.k, p.alpha, p.w, CUDA_R_16F, p.ldw, p.x, CUDA_R_16F, p.k,
                            p.beta, p.y, CUDA_R_32F, p.ldy, kCompute32F, kGemmDefault);
    }
    if (st != kStatusSuccess) fail("cublasGemmEx failed (status %d, m %d n %d k %d)", st, p.m, p.n, p.k);
}

void Blas::gemm_f16(cudaStream_t s, float* y, size_t ldy, const void* w, size_t ldw, const void* x, size_t m, size_t n,
                    size_t k, const float* alpha, const float* beta) {
    const GemmParams p{api_,
                       handle_,
                       y,
                       w,
                       x,
                       alpha,
                       beta,
                       workspace_,
                       workspace_bytes_,
                       as_int(m, "rows"),
                       as_int(n, "tokens"),
                       as_int(k, "width"),
                       as_int(ldy, "row stride"),
                       as_int(ldw, "weight stride"),
                       0};
    enqueue_call(s, &Blas::enqueue, &p, sizeof(p));
}

}  // namespace cuda
}  // namespace cactus
