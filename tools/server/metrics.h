#pragma once
// Counters, gauges and histograms of the server in Prometheus' text format (GET /metrics).
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cactus::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
    void observe(double value);
    // Appends the _bucket, _sum and _count lines of `name` (caller holds the lock).
    void render(std::string& out, const std::string& name, const std::string& help) const;

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // [bounds.size() + 1]: the last one is +Inf
    double sum_ = 0.0;
    uint64_t count_ = 0;
};

class Metrics {
public:
    Metrics();

    void observe_request(const std::string& endpoint, int status, double seconds);
    void observe_queue(double seconds);
    void observe_ttft(double seconds);
    void observe_done(size_t prompt_tokens, size_t cached_tokens, size_t completion_tokens, double seconds,
                      const std::string& finish_reason);
    void observe_handoff(bool ok);
    // llama-server's counters: one engine step with `busy_slots` slots in it; a finished request's
    // computed prompt tokens (cached ones excluded) and generated tokens with their times.
    void observe_step(size_t busy_slots);
    void observe_timings(size_t prompt_tokens, double prompt_s, size_t predicted_tokens, double predicted_s,
                         size_t sequence_tokens);
    void set_load(size_t queued, size_t busy_slots);
    // One verified draft of `drafted` tokens, `accepted` of them kept (speculative decoding).
    void observe_drafts(size_t drafted, size_t accepted);
    // A token whose step gave candidates instead of logits (SeqStep::top): drawn from them, or
    // from the logits fetched because they could not tell.
    void observe_candidates(bool drawn);

    // Also starts the window of llama-server's throughput gauges (averaged between two scrapes).
    std::string render(size_t n_slots) const;

private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) → count
    std::map<std::string, uint64_t> finished_;                  // finish_reason → count
    uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
    uint64_t handoffs_ok_ = 0, handoffs_failed_ = 0;
    uint64_t candidate_tokens_ = 0, candidate_fetches_ = 0;
    size_t queued_ = 0, busy_ = 0;
    Histogram request_seconds_, queue_seconds_, ttft_seconds_, generation_seconds_;
    void render_llamacpp(std::string& out) const;
    // llama-server's (llamacpp:*) metrics
    struct Throughput {
        uint64_t tokens = 0;
        double seconds = 0.0;
        double per_second() const { return seconds > 0.0 ? static_cast<double>(tokens) / seconds : 0.0; }
    };
    Throughput prompt_, predicted_;                        // since start
    mutable Throughput prompt_window_, predicted_window_;  // since the last scrape
    uint64_t n_decode_ = 0, n_busy_slots_ = 0, n_tokens_max_ = 0;
    uint64_t draft_tokens_ = 0, draft_accepted_ = 0, draft_steps_ = 0;
};

}  // namespace cactus::server
