// StepRecorder: serialized launch nodes, node-by-node matching against captured graphs, capture of
// a segment seen twice. See cuda_step_graph.h.
#include "backends/cuda/cuda_step_graph.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

constexpr size_t kMinNodes = 8;   // shorter segments (an upload and a download) gain nothing from a graph
constexpr size_t kMaxGraphs = 8;  // live graphs per backend (step shapes in use: batch sizes, head modes)
constexpr uint8_t kKernelTag = 1;
constexpr uint8_t kCopyTag = 2;
constexpr uint8_t kCallTag = 3;

thread_local StepRecorder* t_active = nullptr;
bool g_programmatic = false;

size_t pad8(size_t n) { return (n + 7) & ~size_t(7); }

// Node layout (8-byte fields, zero padding): kernel = tag, func, grid xyz + block xyz + shared +
// n_args (u32 each, 8 of them), then per argument its size (u64) and its bytes padded to 8;
// copy = tag, dst, src, bytes, kind; call = tag, fn, bytes (u64), then the parameter bytes padded to 8.
struct KernelHead {
    uint64_t tag;
    const void* func;
    uint32_t dims[6];
    uint32_t shared;
    uint32_t n_args;
};
struct CallHead {
    uint64_t tag;
    EnqueueFn fn;
    uint64_t bytes;
};
struct CopyNode {
    uint64_t tag;
    void* dst;
    const void* src;
    uint64_t bytes;
    uint64_t kind;
};

void throw_if(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    cudaGetLastError();
    fail("cuda %s failed: %s", what, cudaGetErrorString(e));
}

cudaError_t launch_kernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t s) {
    if (!g_programmatic) return cudaLaunchKernel(func, grid, block, args, shared, s);
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared;
    config.stream = s;
    cudaLaunchAttribute attribute[1] = {};
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelExC(&config, func, args);
}

}  // namespace

void set_programmatic_launch(bool on) { g_programmatic = on; }
bool programmatic_launch() { return g_programmatic; }

void enqueue_kernel(cudaStream_t s, const KernelCall& call) {
    if (t_active) {
        t_active->kernel(call);
        return;
    }
    throw_if(launch_kernel(call.func, call.grid, call.block, call.args, call.shared, s), "kernel launch");
}

void enqueue_call(cudaStream_t s, EnqueueFn fn, const void* params, size_t bytes) {
    if (t_active) {
        t_active->call(fn, params, bytes);
        return;
    }
    fn(s, params);
}

void enqueue_copy(cudaStream_t s, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (t_active) {
        t_active->copy(dst, src, bytes, kind);
        return;
    }
    throw_if(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync");
}

RecorderScope::RecorderScope(StepRecorder* r) : saved_(t_active) { t_active = r; }
RecorderScope::~RecorderScope() { t_active = saved_; }

void StepRecorder::Segment::clear() {
    bytes.clear();
    offset.assign(1, 0);
    kernels = 0;
    copies = 0;
}

StepRecorder::StepRecorder(cudaStream_t stream, bool enabled) : stream_(stream), enabled_(enabled) {
    current_.clear();
    previous_.clear();
}

StepRecorder::~StepRecorder() {
    for (auto& g : graphs_) {
        if (g->exec) cudaGraphExecDestroy(g->exec);
    }
}

void StepRecorder::kernel(const KernelCall& call) {
    size_t n = sizeof(KernelHead);
    for (int i = 0; i < call.n_args; ++i) n += 8 + pad8(call.sizes[i]);
    scratch_.assign(n, 0);
    KernelHead head{};
    head.tag = kKernelTag;
    head.func = call.func;
    const uint32_t dims[6] = {call.grid.x, call.grid.y, call.grid.z, call.block.x, call.block.y, call.block.z};
    std::memcpy(head.dims, dims, sizeof(dims));
    head.shared = static_cast<uint32_t>(call.shared);
    head.n_args = static_cast<uint32_t>(call.n_args);
    std::memcpy(scratch_.data(), &head, sizeof(head));
    size_t at = sizeof(KernelHead);
    for (int i = 0; i < call.n_args; ++i) {
        const uint64_t size = call.sizes[i];
        std::memcpy(scratch_.data() + at, &size, 8);
        std::memcpy(scratch_.data() + at + 8, call.args[i], size);
        at += 8 + pad8(size);
    }
    append(scratch_.data(), n, true);
}

void StepRecorder::copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    CopyNode node{kCopyTag, dst, src, bytes, static_cast<uint64_t>(kind)};
    append(reinterpret_cast<const uint8_t*>(&node), sizeof(node), false);
}

void StepRecorder::call(EnqueueFn fn, const void* params, size_t bytes) {
    scratch_.assign(sizeof(CallHead) + pad8(bytes), 0);
    const CallHead head{kCallTag, fn, bytes};
    std::memcpy(scratch_.data(), &head, sizeof(head));
    std::memcpy(scratch_.data() + sizeof(head), params, bytes);
    append(scratch_.data(), scratch_.size(), true);
}

void StepRecorder::stage_copy(void* dst, const void* src, size_t bytes) {
    const char* from = static_cast<const char*>(src);
    if (!holding_) {
        throw_if(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (staging)");
        ++counters_.copies;
        return;
    }
    if (staged_src_ == nullptr || from < staged_src_) {
        staged_dst_ = static_cast<char*>(dst);
        if (staged_src_ == nullptr) staged_end_ = from + bytes;
        staged_src_ = from;
    }
    staged_end_ = std::max(staged_end_, from + bytes);
}

void StepRecorder::launch_staged() {
    if (staged_src_ == nullptr) return;
    const size_t bytes = static_cast<size_t>(staged_end_ - staged_src_);
    const char* src = staged_src_;
    staged_src_ = staged_end_ = nullptr;
    throw_if(cudaMemcpyAsync(staged_dst_, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (staging)");
    ++counters_.copies;
}

void StepRecorder::append(const uint8_t* node, size_t n, bool is_kernel) {
    const size_t i = current_.nodes();
    if (i == 0 && enabled_ && !graphs_.empty()) {
        holding_ = true;
        candidates_.clear();
        for (auto& g : graphs_) candidates_.push_back(g.get());
    }
    current_.bytes.insert(current_.bytes.end(), node, node + n);
    current_.offset.push_back(static_cast<uint32_t>(current_.bytes.size()));
    (is_kernel ? current_.kernels : current_.copies) += 1;
    if (holding_) {
        const auto differs = [&](const Segment* c) {
            if (c->nodes() <= i) return true;
            const size_t len = c->offset[i + 1] - c->offset[i];
            return len != n || std::memcmp(c->bytes.data() + c->offset[i], node, n) != 0;
        };
        candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(), differs), candidates_.end());
        if (!candidates_.empty()) return;
        holding_ = false;
    }
    launch_from(launched_);
}

void StepRecorder::launch_node(const uint8_t* node, const uint8_t* end) const {
    uint64_t tag = 0;
    std::memcpy(&tag, node, 8);
    if (tag == kCopyTag) {
        CopyNode c{};
        std::memcpy(&c, node, sizeof(c));
        throw_if(cudaMemcpyAsync(c.dst, c.src, c.bytes, static_cast<cudaMemcpyKind>(c.kind), stream_),
                 "cudaMemcpyAsync");
        return;
    }
    if (tag == kCallTag) {
        CallHead c{};
        std::memcpy(&c, node, sizeof(c));
        CACTUS_ASSERT(node + sizeof(c) + pad8(c.bytes) == end);
        c.fn(stream_, node + sizeof(c));
        return;
    }
    KernelHead head{};
    std::memcpy(&head, node, sizeof(head));
    void* args[64];
    CACTUS_ASSERT(head.n_args <= 64);
    const uint8_t* at = node + sizeof(KernelHead);
    for (uint32_t i = 0; i < head.n_args; ++i) {
        uint64_t size = 0;
        std::memcpy(&size, at, 8);
        args[i] = const_cast<uint8_t*>(at + 8);
        at += 8 + pad8(size);
    }
    CACTUS_ASSERT(at == end);
    const dim3 grid(head.dims[0], head.dims[1], head.dims[2]);
    const dim3 block(head.dims[3], head.dims[4], head.dims[5]);
    throw_if(launch_kernel(head.func, grid, block, args, head.shared, stream_), "kernel launch");
}

void StepRecorder::launch_from(size_t first) {
    launch_staged();
    for (size_t i = first; i < current_.nodes(); ++i) {
        const uint8_t* node = current_.bytes.data() + current_.offset[i];
        launch_node(node, current_.bytes.data() + current_.offset[i + 1]);
        uint64_t tag = 0;
        std::memcpy(&tag, node, 8);
        (tag == kCopyTag ? counters_.copies : counters_.kernels) += 1;
    }
    launched_ = current_.nodes();
}

void StepRecorder::flush() {
    if (!holding_) return;
    holding_ = false;
    candidates_.clear();
    launch_from(launched_);
}

bool StepRecorder::same(const Segment& a, const Segment& b) { return a.offset == b.offset && a.bytes == b.bytes; }

void StepRecorder::finish() {
    if (current_.nodes() == 0) return;
    ++counters_.segments;
    Segment* match = nullptr;
    if (holding_) {
        for (Segment* c : candidates_) {
            if (c->nodes() == current_.nodes()) match = c;
        }
    }
    struct Reset {
        StepRecorder& r;
        ~Reset() {
            r.current_.clear();
            r.holding_ = false;
            r.launched_ = 0;
            r.candidates_.clear();
        }
    } reset{*this};
    if (match) {
        launch_staged();
        throw_if(cudaGraphLaunch(match->exec, stream_), "cudaGraphLaunch");
        match->last_used = ++tick_;
        ++counters_.graph_replays;
        counters_.kernels += match->kernels;
        counters_.copies += match->copies;
        return;
    }
    flush();
    launch_staged();  // a held segment of staging copies only
    if (!enabled_ || current_.nodes() < kMinNodes) return;
    if (same(current_, previous_)) {
        capture(current_);
        previous_.clear();
    } else {
        std::swap(previous_, current_);
    }
}

void StepRecorder::evict_if_full() {
    if (graphs_.size() < kMaxGraphs) return;
    // Every earlier segment completed at its synchronize(), so no graph is in flight here.
    auto oldest = std::min_element(graphs_.begin(), graphs_.end(),
                                   [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
    cudaGraphExecDestroy((*oldest)->exec);
    graphs_.erase(oldest);
}

void StepRecorder::capture(const Segment& s) {
    for (const auto& g : graphs_) {
        if (same(*g, s)) return;  // a flushed replay of a known graph
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::string failed;
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        failed = "cudaStreamBeginCapture";
    } else {
        try {
            for (size_t i = 0; i < s.nodes(); ++i) {
                launch_node(s.bytes.data() + s.offset[i], s.bytes.data() + s.offset[i + 1]);
            }
        } catch (const Error& e) {
            failed = e.what();
        }
        const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
        if (failed.empty() && end != cudaSuccess)
            failed = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(end);
    }
    if (failed.empty() && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) failed = "cudaGraphInstantiate";
    if (graph) cudaGraphDestroy(graph);
    if (!failed.empty()) {
        cudaGetLastError();
        enabled_ = false;
        disabled_ = "graph capture failed (" + failed + "); steps run eagerly";
        return;
    }
    evict_if_full();
    auto g = std::make_unique<Segment>(s);
    g->exec = exec;
    g->last_used = ++tick_;
    graphs_.push_back(std::move(g));
    ++counters_.graph_captures;
}

}  // namespace cuda
}  // namespace cactus
