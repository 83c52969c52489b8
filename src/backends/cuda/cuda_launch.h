#pragma once
// The one funnel every enqueue of the CUDA backend goes through: kernel launches (cuda_launch.cuh's
// run_kernel) and device copies. Outside a step recorder (cuda_step_graph.h) they go to the stream
// at once; inside one, the recorder decides whether they run now or replay as part of a captured
// CUDA graph. Launch errors throw cactus::Error.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cactus {
namespace cuda {

// A kernel launch: args[i] points at parameter i's value of sizes[i] bytes (cudaLaunchKernel's form).
struct KernelCall {
    const void* func = nullptr;
    dim3 grid;
    dim3 block;
    size_t shared = 0;
    void** args = nullptr;
    const uint16_t* sizes = nullptr;
    int n_args = 0;
};

class StepRecorder;

// Programmatic dependent launch (Hopper): kernels are launched with programmatic stream
// serialization, so the next kernel's blocks are scheduled while the current one runs and wait in
// pdl_start() (cuda_launch.cuh) for it to finish. Every kernel calls pdl_start() before touching
// memory. Off: environment CACTUS_CUDA_PDL=0 (read by the backend at construction).
void set_programmatic_launch(bool on);
bool programmatic_launch();

// A library call that enqueues its own kernels (cuBLAS): `fn(stream, params)` with `bytes` of
// plain parameter data. The recorder keeps the bytes as the node, so a step holding one matches,
// captures and replays like any other (the library must then allocate nothing while captured).
using EnqueueFn = void (*)(cudaStream_t s, const void* params);

// Enqueues on `s` (or hands to the recorder active on this thread).
void enqueue_kernel(cudaStream_t s, const KernelCall& call);
void enqueue_call(cudaStream_t s, EnqueueFn fn, const void* params, size_t bytes);
void enqueue_copy(cudaStream_t s, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);

// While alive, this thread's enqueues go to `r` (nullptr: straight to the stream).
class RecorderScope {
public:
    explicit RecorderScope(StepRecorder* r);
    ~RecorderScope();
    RecorderScope(const RecorderScope&) = delete;
    RecorderScope& operator=(const RecorderScope&) = delete;

private:
    StepRecorder* saved_;
};

}  // namespace cuda
}  // namespace cactus
