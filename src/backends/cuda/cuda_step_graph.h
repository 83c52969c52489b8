#pragma once
// CUDA graphs for repeated steps. Everything the backend enqueues between two synchronize() calls
// (a "segment": one decode step, say) passes through a StepRecorder as a list of nodes (kernel
// launches with their argument bytes, device copies). A segment seen twice in a row with the same
// bytes is captured once into a CUDA graph; later segments are compared node by node against the
// captured ones while nothing is launched, and a segment that matches one whole runs as one
// cudaGraphLaunch. The first node that matches no graph launches the held-back prefix eagerly and
// the rest of the segment runs eagerly, so the graph never runs anything but the exact launches
// the eager path would have made. Per-token values must therefore live in device memory (staged
// inputs at fixed offsets, KV descriptors, positions), never in kernel arguments: a segment whose
// arguments change every time simply never replays.
//
// Off switch: environment CACTUS_CUDA_GRAPHS=0 (everything eager).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_launch.h"

namespace cactus {
namespace cuda {

struct StepCounters {
    uint64_t kernels = 0;         // kernel launches and library calls, eager or inside replayed graphs
    uint64_t copies = 0;          // device copies, likewise
    uint64_t segments = 0;        // segments finished
    uint64_t graph_replays = 0;   // segments run as one graph launch
    uint64_t graph_captures = 0;  // graphs captured (a new shape of step)
};

class StepRecorder {
public:
    StepRecorder(cudaStream_t stream, bool enabled);
    ~StepRecorder();
    StepRecorder(const StepRecorder&) = delete;
    StepRecorder& operator=(const StepRecorder&) = delete;

    void kernel(const KernelCall& call);
    void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
    void call(EnqueueFn fn, const void* params, size_t bytes);
    // A host-to-device copy of per-step inputs from the pinned staging area into its device twin
    // (dst - src the same for every call). Never a graph node: while the segment is held back these
    // copies merge into one, enqueued just before the graph or the eager prefix (each twin offset is
    // written once per segment, so running them early is safe); otherwise they go out at once.
    void stage_copy(void* dst, const void* src, size_t bytes);
    // Launches whatever of the segment is still held back (before a stream-ordered alloc or free,
    // which must not overtake work recorded earlier).
    void flush();
    // Ends the segment: replays its graph or finishes it eagerly; captures a repeated one.
    void finish();

    bool enabled() const { return enabled_; }
    const StepCounters& counters() const { return counters_; }
    // Why graphs were switched off after a failed capture (empty while they work).
    const std::string& disabled_reason() const { return disabled_; }

private:
    struct Segment {
        std::vector<uint8_t> bytes;    // the nodes, serialized back to back
        std::vector<uint32_t> offset;  // node i = bytes [offset[i], offset[i + 1]); offset.back() = size
        uint64_t kernels = 0;
        uint64_t copies = 0;
        cudaGraphExec_t exec = nullptr;
        uint64_t last_used = 0;
        size_t nodes() const { return offset.size() - 1; }
        void clear();
    };
    void append(const uint8_t* node, size_t n, bool is_kernel);
    void launch_node(const uint8_t* node, const uint8_t* end) const;
    void launch_from(size_t first);  // launches the held staging copy, then current_ nodes [first, end)
    void launch_staged();
    void capture(const Segment& s);
    static bool same(const Segment& a, const Segment& b);
    void evict_if_full();

    cudaStream_t stream_;
    bool enabled_;
    bool holding_ = false;  // the segment's nodes so far are held back (candidates left)
    size_t launched_ = 0;   // nodes of current_ already enqueued
    Segment current_;
    Segment previous_;  // the last segment run eagerly (capture when the next one equals it)
    std::vector<std::unique_ptr<Segment>> graphs_;
    std::vector<Segment*> candidates_;
    std::vector<uint8_t> scratch_;
    char* staged_dst_ = nullptr;  // the held staging copy: [staged_src_, staged_end_) to staged_dst_
    const char* staged_src_ = nullptr;
    const char* staged_end_ = nullptr;
    uint64_t tick_ = 0;
    StepCounters counters_;
    std::string disabled_;
};

}  // namespace cuda
}  // namespace cactus
