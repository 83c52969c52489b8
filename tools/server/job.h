#pragma once
// One generation request on its way through the server: what the HTTP side asks for (GenParams),
// and the events the scheduler sends back (one per generated token, then Done or Error). The HTTP
// thread waits on the job with a deadline; the scheduler thread never blocks on it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "models/vision/media_prompt.h"

namespace cactus::server {

using Clock = std::chrono::steady_clock;

struct GenParams {
    std::vector<int32_t> prompt;               // [n]; < 0: row i of media (an image row)
    std::shared_ptr<const MediaPrompt> media;  // prompts with images: rows [n, n_embd], groups [n]
    GenerationOptions gen;                     // max_tokens, sampling, stop sequences
    int top_logprobs = -1;                     // -1: no log-probabilities; else alternatives per token (0..20)
    Clock::time_point deadline = Clock::time_point::max();
};

struct TokenInfo {
    int32_t id = -1;
    float probability = 0.0f;                    // softmax probability of the chosen token (the confidence signal)
    float logprob = 0.0f;                        // log-softmax of the raw logits (OpenAI's logprobs)
    std::vector<std::pair<int32_t, float>> top;  // most likely alternatives: (id, logprob)
};

struct GenStats {
    size_t prompt_tokens = 0;
    size_t cached_tokens = 0;  // prompt tokens reused from the slot's cache
    size_t completion_tokens = 0;
    double queue_ms = 0.0;  // submitted → slot assigned
    double ttft_ms = 0.0;   // submitted → first token
    double total_ms = 0.0;  // submitted → done
    double decode_tps = 0.0;
    int slot = -1;
};

struct GenEvent {
    enum class Kind { Token, Done, Error };
    Kind kind = Kind::Token;
    std::string text;           // Token: visible text completed by this token (may be empty); Done: held-back tail
    TokenInfo token;            // Token only
    std::string finish_reason;  // Done: "stop", "length", "cancelled", "timeout"
    std::string stop_word;      // Done: the stop sequence that ended the reply (empty: end of turn or other)
    GenStats stats;             // Done
    int status = 500;           // Error: HTTP status
    std::string error;          // Error: message
};

class Job {
public:
    explicit Job(GenParams params) : params_(std::move(params)), submitted_(Clock::now()) {}

    const GenParams& params() const { return params_; }
    Clock::time_point submitted() const { return submitted_; }

    // HTTP side: moves the pending events into *out; waits up to `wait` when there are none.
    // Returns false when nothing arrived in time.
    bool take(std::vector<GenEvent>* out, std::chrono::milliseconds wait);
    // Either side: ask the scheduler to stop this job and free its slot at its next step.
    void cancel() { cancelled_.store(true); }
    bool cancelled() const { return cancelled_.load(); }

    // Scheduler side.
    void push(GenEvent event);

private:
    GenParams params_;
    Clock::time_point submitted_;
    std::atomic<bool> cancelled_{false};
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<GenEvent> events_;
};

}  // namespace cactus::server
