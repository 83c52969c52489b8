#pragma once
// cuBLAS, loaded at run time (dlopen of libcublas.so.13 or .12), for the prompt products on
// dequantized f16 weights (cuda_gemm.h). Nothing links against it: a machine without the library
// keeps the tiled int8 products, and the build needs no cuBLAS headers (the few types and values
// used are declared in cuda_blas.cpp, as cublas_api.h of CUDA 12 and 13 defines them).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>

namespace cactus {
namespace cuda {

// One cuBLAS handle with its own workspace (set once, so that cuBLAS allocates nothing while a
// step graph captures its products) and device-side alpha and beta. Handles are never destroyed:
// cublasDestroy waits for the whole device (cudaDeviceSynchronize), which a hung kernel of any
// backend would make endless. A Blas returns its handle to a per-process pool instead, and the
// next Blas on that device takes it, so a process holds as many as it ever used at once.
class Blas {
public:
    // Null, with the reason in *why, when the library cannot be loaded or the handle not made.
    // `device` must be current; `workspace` (on it, workspace_bytes) outlives the Blas.
    static std::unique_ptr<Blas> open(int device, void* workspace, size_t workspace_bytes, std::string* why);
    ~Blas();
    Blas(const Blas&) = delete;
    Blas& operator=(const Blas&) = delete;

    // Enqueued on s through the launch funnel (cuda_launch.h: enqueue_call), so a step graph
    // captures it: y [n, m] (f32, rows of ldy floats) = *alpha * x [n, k] (f16) w [m, k]^T (f16, rows
    // of ldw halves) + *beta * y. alpha and beta are device addresses.
    void gemm_f16(cudaStream_t s, float* y, size_t ldy, const void* w, size_t ldw, const void* x, size_t m, size_t n,
                  size_t k, const float* alpha, const float* beta);

    struct Api;

private:
    Blas() = default;
    static void enqueue(cudaStream_t s, const void* params);

    const Api* api_ = nullptr;
    int device_ = 0;
    void* handle_ = nullptr;  // cublasHandle_t
    void* workspace_ = nullptr;
    size_t workspace_bytes_ = 0;
};

}  // namespace cuda
}  // namespace cactus
