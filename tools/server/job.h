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
#include "engine/media/media_prompt.h"

namespace cactus::server {

using Clock = std::chrono::steady_clock;

struct GenParams {
    std::vector<int32_t> prompt;               // [n]; < 0: row i of media (an image row)
    std::shared_ptr<const MediaPrompt> media;  // prompts with images: rows [n, n_embd], groups [n]
    GenerationOptions gen;                     // max_tokens, sampling, stop sequences
    int top_logprobs = -1;                     // -1: no log-probabilities; else alternatives per token (0..20)
    Clock::time_point deadline = Clock::time_point::max();
    // llama-server's slot controls (/completion): run in slot id_slot (-1: the free slot sharing the
    // longest prefix); cache_prompt false drops the slot's cache so the whole prompt is computed;
    // report_progress sends Progress events while the prompt is computed (return_progress).
    int id_slot = -1;
    bool cache_prompt = true;
    bool report_progress = false;
    // > 0: generation stops at the first newline after this many ms of generating (llama-server's
    // t_max_predict_ms, for code completion).
    double t_max_predict_ms = 0.0;
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
    uint64_t id_task = 0;        // the scheduler's number for the request (llama-server's id_task)
    std::string stop_word;       // Done with "stop": the stop sequence that matched; empty: an end-of-generation token
    bool has_new_line = false;   // the generated text holds a newline
    size_t tokens_in_cache = 0;  // Done: tokens the slot's cache holds afterwards (prompt and reply)
    size_t draft_n = 0;          // speculation: drafted tokens verified (llama-server's timings.draft_n)
    size_t draft_accepted = 0;   // of those, the ones the model kept (draft_n_accepted)
};

struct GenEvent {
    // Progress: a prefill chunk is in (stats: prompt_tokens, cached_tokens, prefilled; only when
    // GenParams::report_progress). Token events carry the running stats too.
    enum class Kind { Token, Progress, Done, Error };
    Kind kind = Kind::Token;
    std::string text;           // Token: visible text completed by this token (may be empty); Done: held-back tail
    TokenInfo token;            // Token only
    std::string finish_reason;  // Done: "stop", "length", "cancelled", "timeout"
    GenStats stats;             // Done, Token and Progress (so far); Done: stats.stop_word
    size_t prefilled = 0;       // Progress: prompt tokens in the cache
    int status = 500;           // Error: HTTP status
    std::string error;          // Error: message
};

class Job {
public:
    explicit Job(GenParams params, uint64_t id = 0) : params_(std::move(params)), submitted_(Clock::now()), id_(id) {}

    const GenParams& params() const { return params_; }
    uint64_t id() const { return id_; }
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
    uint64_t id_;
    std::atomic<bool> cancelled_{false};
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<GenEvent> events_;
};

}  // namespace cactus::server
