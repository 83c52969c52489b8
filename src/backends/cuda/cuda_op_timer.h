#pragma once
// GPU time per op, for finding where a step's time goes (CACTUS_CUDA_PROFILE=1). Each launch is
// bracketed by two events on the stream; after each completed synchronize the pairs are read and
// summed per op label ("matmul", "attention_kv", ...). The table goes to stderr when the backend is
// destroyed. Step graphs are off while profiling (a replayed graph has no events between its
// kernels), so the profile is of the eager launches: the kernels' own time, not the launch gaps.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace cactus::cuda {

class OpTimer {
public:
    explicit OpTimer(bool on) : on_(on) {}
    ~OpTimer();
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

    bool on() const { return on_; }
    // Around one launch of `op` on `stream`.
    void begin(cudaStream_t stream);
    void end(cudaStream_t stream, std::string op);
    // The stream has finished everything enqueued: the pending pairs' times into the totals.
    void collect();
    // Per op: milliseconds, launches and share of the total, largest first.
    std::string table() const;

private:
    struct Total {
        double ms = 0.0;
        size_t launches = 0;
    };
    struct Pending {
        std::string op;
        cudaEvent_t start, stop;
    };
    cudaEvent_t take_event();

    bool on_;
    cudaEvent_t open_ = nullptr;  // the start of the launch in progress
    std::vector<Pending> pending_;
    std::vector<cudaEvent_t> free_;
    std::map<std::string, Total> totals_;
};

}  // namespace cactus::cuda
