#pragma once
// run_kernel(stream, kernel, grid, block, shared, args...): kernel<<<grid, block, shared, stream>>>(args...)
// through the backend's funnel (cuda_launch.h), so a step recorder can capture and replay it.
#include <cuda_runtime.h>

#include <tuple>
#include <utility>

#include "backends/cuda/cuda_launch.h"

namespace cactus {
namespace cuda {

// First statement of every kernel: waits until the grid launched before it on the stream has
// finished and its writes are visible (a no-op without programmatic launch), then lets the next
// grid be scheduled. Waiting before any load keeps every read-after-write and write-after-read
// order of the plain stream.
__device__ __forceinline__ void pdl_start() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

namespace detail {

template <class Tuple, size_t... I>
void point_at(Tuple& params, void** args, uint16_t* sizes, std::index_sequence<I...>) {
    ((args[I] = static_cast<void*>(&std::get<I>(params)),
      sizes[I] = static_cast<uint16_t>(sizeof(std::tuple_element_t<I, Tuple>))),
     ...);
}

}  // namespace detail

template <class... P, class... A>
void run_kernel(cudaStream_t s, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared, A&&... a) {
    static_assert(sizeof...(P) == sizeof...(A), "run_kernel: argument count differs from the kernel's");
    std::tuple<std::decay_t<P>...> params(static_cast<std::decay_t<P>>(std::forward<A>(a))...);
    void* args[sizeof...(P) > 0 ? sizeof...(P) : 1] = {};
    uint16_t sizes[sizeof...(P) > 0 ? sizeof...(P) : 1] = {};
    detail::point_at(params, args, sizes, std::index_sequence_for<P...>());
    KernelCall call;
    call.func = reinterpret_cast<const void*>(kernel);
    call.grid = grid;
    call.block = block;
    call.shared = shared;
    call.args = args;
    call.sizes = sizes;
    call.n_args = static_cast<int>(sizeof...(P));
    enqueue_kernel(s, call);
}

}  // namespace cuda
}  // namespace cactus
