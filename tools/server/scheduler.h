#pragma once
// The server's scheduler: N slots (one engine sequence each), a bounded queue of jobs, and one
// thread that repeats a step: admit queued jobs into free slots (the slot whose cached tokens share
// the longest prefix with the prompt, so a conversation's next turn computes only its new part),
// collect every busy slot's work (the last sampled token of decoding slots, a prefill chunk of the
// others, within a token budget so a long prompt does not stall the others' decoding), run one
// backend step, then sample, stream and retire. Cancelled or expired jobs leave their slot at the
// next step. With speculation (slot_drafting.h), a decoding slot adds a draft after its last token
// and takes every token of it the model confirms, plus the model's own next one, from one step.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "job.h"
#include "slot_drafting.h"
#include "step_backend.h"

namespace cactus::server {

class Metrics;
struct SlotState;

struct SchedulerOptions {
    size_t max_queue = 64;       // jobs waiting for a slot; more are refused (HTTP 429)
    size_t step_tokens = 512;    // tokens per step over all slots (decode tokens first)
    size_t prefill_chunk = 256;  // most prompt tokens one slot adds per step
};

struct SlotView {
    int id = 0;
    bool busy = false;
    size_t cached_tokens = 0;
    size_t prompt_tokens = 0;
    size_t generated = 0;
    // The slot's running request, else its last one (llama-server's /slots shows both); id_task 0: none yet.
    uint64_t id_task = 0;
    size_t prompt_cached = 0;  // prompt tokens the request reused from the cache
    bool has_new_line = false;
    int n_probs = -1;
    GenerationOptions gen;
};

// POST /slots/{id}?action=erase: the scheduler thread drops the slot's cache once the slot is idle.
struct EraseRequest {
    int slot = 0;
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    size_t n_erased = 0;
};

class Scheduler {
public:
    // drafter: speculation for the slots without a grammar or images; nullptr: plain decoding.
    Scheduler(StepBackend& backend, const SchedulerOptions& options, Metrics& metrics,
              std::unique_ptr<SlotDrafter> drafter = nullptr);
    ~Scheduler();

    void start();
    void stop();  // cancels everything and joins the thread

    // Queues a job. Returns nullptr when the queue is full.
    std::shared_ptr<Job> submit(GenParams params);
    // Cancels every queued and running job (shutdown deadline reached).
    void cancel_all();
    // Queues the erase of slot `slot`'s cache (done when the slot is next idle); the caller waits on
    // the request. Throws cactus::Error when `slot` is out of range.
    std::shared_ptr<EraseRequest> erase(int slot);

    size_t queued() const;
    size_t busy() const;
    size_t n_slots() const { return backend_.n_seqs(); }
    std::vector<SlotView> slots() const;
    const SchedulerOptions& options() const { return options_; }
    // The speculation settings; type off without a drafter.
    SpecOptions speculative() const { return drafter_ ? drafter_->options() : SpecOptions{}; }

private:
    void loop();
    void admit();
    void retire_cancelled();
    void run_step();
    // The slot's next token from the step's item: from its candidates when they tell it, else
    // from its logits (fetched then).
    void on_logits(SlotState& slot, SeqStep& item);
    // Asks a step's item for the candidates the slot's sampler can draw from (SeqStep::top_k).
    void ask_candidates(const SlotState& slot, SeqStep& item) const;
    // The ids the slot's sampler bans now (the end-of-turn ones under ignore_eos), or null.
    const std::vector<int32_t>* bans_of(const SlotState& slot) const;
    // The drafts of the decoding slots that draft this step, within `budget` tokens.
    std::vector<DraftRequest> draft_requests(size_t budget);
    // A verified draft: the accepted tokens and the model's next one are emitted, the rows of
    // the rejected ones dropped.
    void on_verified(SlotState& slot, SeqStep& item);
    // Sends one chosen token to the client and ends the reply where it should end; room: the
    // context room the slot has once the token is chosen. Returns whether the slot goes on.
    bool emit(SlotState& slot, const TokenInfo& token, size_t room);
    bool still_wanted(SlotState& slot);  // false (and the slot finished) when cancelled or too late
    void finish(SlotState& slot, const std::string& reason);
    void fail_slot(SlotState& slot, int status, const std::string& message);
    void release(SlotState& slot);
    void publish_view(const SlotState& slot);  // views_[slot.id] from the slot; caller holds mutex_
    void erase_idle_slots();
    void report_progress(SlotState& slot);
    int pick_slot(const GenParams& params) const;

    StepBackend& backend_;
    SchedulerOptions options_;
    Metrics& metrics_;
    std::unique_ptr<SlotDrafter> drafter_;
    std::vector<std::unique_ptr<SlotState>> slots_;  // touched by the scheduler thread only
    std::vector<uint64_t> slot_last_used_;

    mutable std::mutex mutex_;  // guards queue_, running_, busy_, views_, running_jobs_, erases_
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::vector<SlotView> views_;
    std::vector<std::shared_ptr<Job>> running_jobs_;  // per slot, for cancel_all()
    std::vector<std::shared_ptr<EraseRequest>> erases_;
    size_t busy_ = 0;
    bool running_ = false;
    std::thread thread_;
    uint64_t use_counter_ = 0;
    uint64_t job_counter_ = 0;  // guarded by mutex_
};

}  // namespace cactus::server
