#include "metrics.h"

#include <algorithm>
#include <cstdio>

namespace cactus::server {

namespace {

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

}  // namespace

void Histogram::observe(double value) {
    size_t i = 0;
    while (i < bounds_.size() && value > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += value;
    ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    cumulative += counts_.back();
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
    out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : request_seconds_(kLatencyBounds),
      queue_seconds_(kLatencyBounds),
      ttft_seconds_(kLatencyBounds),
      generation_seconds_(kLatencyBounds) {}

void Metrics::observe_request(const std::string& endpoint, int status, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[{endpoint, status}];
    request_seconds_.observe(seconds);
}

void Metrics::observe_queue(double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_seconds_.observe(seconds);
}

void Metrics::observe_ttft(double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    ttft_seconds_.observe(seconds);
}

void Metrics::observe_done(size_t prompt_tokens, size_t cached_tokens, size_t completion_tokens, double seconds,
                           const std::string& finish_reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    prompt_tokens_ += prompt_tokens;
    cached_tokens_ += cached_tokens;
    completion_tokens_ += completion_tokens;
    ++finished_[finish_reason];
    generation_seconds_.observe(seconds);
}

void Metrics::observe_step(size_t busy_slots) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++n_decode_;
    n_busy_slots_ += busy_slots;
}

void Metrics::observe_drafts(size_t drafted, size_t accepted) {
    std::lock_guard<std::mutex> lock(mutex_);
    draft_tokens_ += drafted;
    draft_accepted_ += accepted;
    ++draft_steps_;
}

void Metrics::observe_candidates(bool drawn) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(drawn ? candidate_tokens_ : candidate_fetches_);
}

void Metrics::observe_timings(size_t prompt_tokens, double prompt_s, size_t predicted_tokens, double predicted_s,
                              size_t sequence_tokens) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Throughput* t : {&prompt_, &prompt_window_}) {
        t->tokens += prompt_tokens;
        t->seconds += prompt_s;
    }
    for (Throughput* t : {&predicted_, &predicted_window_}) {
        t->tokens += predicted_tokens;
        t->seconds += predicted_s;
    }
    n_tokens_max_ = std::max<uint64_t>(n_tokens_max_, sequence_tokens);
}

// Names, types and help texts of llama-server's /metrics (its server_task_result_metrics), so its
// dashboards read this server unchanged.
void Metrics::render_llamacpp(std::string& out) const {
    auto item = [&](const char* type, const char* name, const char* help, double v) {
        out += std::string("# HELP llamacpp:") + name + " " + help + "\n# TYPE llamacpp:" + name + " " + type +
               "\nllamacpp:" + name + " " + number(v) + "\n";
    };
    item("counter", "prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
         static_cast<double>(prompt_.tokens));
    item("counter", "prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
         static_cast<double>(cached_tokens_));
    item("counter", "prompt_seconds_total", "Total time spent processing prompts", prompt_.seconds);
    item("counter", "tokens_predicted_total", "Number of generation tokens processed",
         static_cast<double>(predicted_.tokens));
    item("counter", "tokens_predicted_seconds_total", "Total time spent generating tokens", predicted_.seconds);
    item("counter", "n_decode_total",
         "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
         static_cast<double>(n_decode_));
    item("counter", "n_tokens_max", "Largest observed sequence length (prompt + generation)",
         static_cast<double>(n_tokens_max_));
    item("counter", "spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated",
         static_cast<double>(draft_tokens_));
    item("counter", "spec_decode_num_accepted_tokens_total",
         "Speculative: Total draft tokens accepted by the target model", static_cast<double>(draft_accepted_));
    item("counter", "spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps",
         static_cast<double>(draft_steps_));
    item("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s", prompt_window_.per_second());
    item("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s",
         predicted_window_.per_second());
    item("gauge", "requests_processing", "Number of requests processing", static_cast<double>(busy_));
    item("gauge", "requests_deferred", "Number of requests deferred", static_cast<double>(queued_));
    item("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
         static_cast<double>(n_busy_slots_) / std::max(static_cast<double>(n_decode_), 1.0));
    prompt_window_ = Throughput{};
    predicted_window_ = Throughput{};
}

void Metrics::observe_handoff(bool ok) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(ok ? handoffs_ok_ : handoffs_failed_);
}

void Metrics::set_load(size_t queued, size_t busy_slots) {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_ = queued;
    busy_ = busy_slots;
}

std::string Metrics::render(size_t n_slots) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    out += "# HELP cactus_requests_total HTTP requests by endpoint and status.\n# TYPE cactus_requests_total counter\n";
    for (const auto& [key, count] : requests_) {
        out += "cactus_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
               std::to_string(count) + "\n";
    }
    out += "# HELP cactus_generations_total Generations by finish reason.\n# TYPE cactus_generations_total counter\n";
    for (const auto& [reason, count] : finished_)
        out += "cactus_generations_total{finish_reason=\"" + reason + "\"} " + std::to_string(count) + "\n";
    auto counter = [&](const char* name, const char* help, uint64_t v) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
               std::to_string(v) + "\n";
    };
    auto gauge = [&](const char* name, const char* help, double v) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + number(v) +
               "\n";
    };
    counter("cactus_prompt_tokens_total", "Prompt tokens of finished generations.", prompt_tokens_);
    counter("cactus_prompt_tokens_cached_total", "Prompt tokens reused from a slot's cache.", cached_tokens_);
    counter("cactus_completion_tokens_total", "Tokens generated.", completion_tokens_);
    counter("cactus_handoffs_total", "Completions answered by the hand-off endpoint.", handoffs_ok_);
    counter("cactus_handoff_failures_total", "Hand-offs that fell back to the local answer.", handoffs_failed_);
    counter("cactus_tokens_from_candidates_total",
            "Tokens drawn from candidates computed where the logits are (only they came back).", candidate_tokens_);
    counter("cactus_candidate_fetches_total", "Tokens whose candidates could not tell them: the logits came back.",
            candidate_fetches_);
    gauge("cactus_queue_length", "Requests waiting for a slot.", static_cast<double>(queued_));
    gauge("cactus_slots_busy", "Slots generating.", static_cast<double>(busy_));
    gauge("cactus_slots_total", "Slots (--parallel).", static_cast<double>(n_slots));
    request_seconds_.render(out, "cactus_request_duration_seconds", "HTTP request handling time.");
    queue_seconds_.render(out, "cactus_queue_wait_seconds", "Time from submission to a slot.");
    ttft_seconds_.render(out, "cactus_time_to_first_token_seconds", "Time from submission to the first token.");
    generation_seconds_.render(out, "cactus_generation_duration_seconds", "Time from submission to the last token.");
    render_llamacpp(out);
    return out;
}

}  // namespace cactus::server
