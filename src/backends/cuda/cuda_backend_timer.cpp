#include <algorithm>
#include <cstdio>
#include <utility>

#include "backends/cuda/cuda_op_timer.h"

namespace cactus::cuda {

OpTimer::~OpTimer() {
    if (!on_) return;
    if (!totals_.empty()) std::fprintf(stderr, "%s", table().c_str());
    // Pairs still pending belong to work that never completed (a broken handle): leaked, not waited for.
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t OpTimer::take_event() {
    if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return e;
}

void OpTimer::begin(cudaStream_t stream) {
    open_ = take_event();
    if (open_ != nullptr && cudaEventRecord(open_, stream) != cudaSuccess) cudaGetLastError();
}

void OpTimer::end(cudaStream_t stream, std::string op) {
    cudaEvent_t stop = take_event();
    if (open_ == nullptr || stop == nullptr) return;
    if (cudaEventRecord(stop, stream) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    pending_.push_back({std::move(op), open_, stop});
    open_ = nullptr;
}

void OpTimer::collect() {
    for (const Pending& p : pending_) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, p.start, p.stop) == cudaSuccess) {
            Total& t = totals_[p.op];
            t.ms += ms;
            ++t.launches;
        } else {
            cudaGetLastError();
        }
        free_.push_back(p.start);
        free_.push_back(p.stop);
    }
    pending_.clear();
}

std::string OpTimer::table() const {
    std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double all = 0.0;
    for (const auto& r : rows) all += r.second.ms;
    std::string out = "cuda profile (CACTUS_CUDA_PROFILE): op, GPU ms, launches, share\n";
    char line[200];
    for (const auto& [op, t] : rows) {
        std::snprintf(line, sizeof(line), "  %-36s %10.3f %9zu %6.1f%%\n", op.c_str(), t.ms, t.launches,
                      all > 0.0 ? 100.0 * t.ms / all : 0.0);
        out += line;
    }
    return out;
}

}  // namespace cactus::cuda
