#include "core/thread_pool.h"

#include <algorithm>

#include "core/error.h"

namespace cactus {

namespace {
constexpr int kSpinIterations = 20000;
constexpr int kCountBits = 20;
constexpr uint64_t kCountMask = (uint64_t(1) << kCountBits) - 1;

inline uint64_t state_generation(uint64_t s) { return s >> (2 * kCountBits); }
inline size_t state_count(uint64_t s) { return static_cast<size_t>((s >> kCountBits) & kCountMask); }
inline size_t state_next(uint64_t s) { return static_cast<size_t>(s & kCountMask); }
inline uint64_t make_state(uint64_t generation, size_t count) {
    return (generation << (2 * kCountBits)) | (static_cast<uint64_t>(count) << kCountBits);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_.store(true);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
}

int ThreadPool::default_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(std::min(n, 8u));
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
    const int count = n_threads_;
    run_chunks(static_cast<size_t>(count), [&](size_t index) { fn(static_cast<int>(index), count); });
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t chunks_per_thread) {
    if (n == 0) return;
    const size_t n_chunks = std::min(n, static_cast<size_t>(n_threads_) * std::max<size_t>(1, chunks_per_thread));
    const size_t per = (n + n_chunks - 1) / n_chunks;
    run_chunks(n_chunks, [&](size_t chunk) {
        const size_t begin = std::min(n, chunk * per);
        const size_t end = std::min(n, begin + per);
        if (begin < end) fn(begin, end);
    });
}

void ThreadPool::run_chunks(size_t n_chunks, const std::function<void(size_t)>& fn) {
    if (n_chunks == 0) return;
    CACTUS_ASSERT(n_chunks <= kCountMask);
    if (n_threads_ == 1 || n_chunks == 1) {
        for (size_t c = 0; c < n_chunks; ++c) fn(c);
        return;
    }
    // The previous job is complete (done_ reached its count), so no thread touches job_, done_
    // or the error slot.
    error_ = nullptr;
    failed_.store(false);
    const uint64_t generation = (state_generation(state_.load()) + 1) & ((uint64_t(1) << 24) - 1);
    done_.store(0);
    job_.store(&fn);
    state_.store(make_state(generation, n_chunks));  // seq_cst: ordered before sleepers_ below
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        wake_.notify_all();
    }
    work_on(generation);
    // Workers always finish (or skip, after an error) a chunk they claimed, so once done_ reaches
    // the count no thread is inside fn and the caller's frame may go.
    while (done_.load(std::memory_order_acquire) != n_chunks) cpu_relax();
    if (failed_.load(std::memory_order_acquire)) {
        std::exception_ptr error;
        {
            std::lock_guard<std::mutex> lock(error_mutex_);
            error.swap(error_);
        }
        failed_.store(false);
        std::rethrow_exception(error);
    }
}

void ThreadPool::record_error(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::move(error);
    failed_.store(true, std::memory_order_release);
}

void ThreadPool::work_on(uint64_t generation) {
    for (;;) {
        uint64_t s = state_.load(std::memory_order_acquire);
        if (state_generation(s) != generation || state_next(s) >= state_count(s)) return;
        // Read before the claim: while chunk next(s) is unclaimed the job cannot finish, so a
        // successful claim of exactly s proves this is the job's function.
        const std::function<void(size_t)>* fn = job_.load(std::memory_order_acquire);
        if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
        if (!failed_.load(std::memory_order_acquire)) {
            try {
                (*fn)(state_next(s));
            } catch (...) {
                record_error(std::current_exception());
            }
        }
        done_.fetch_add(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::worker_loop() {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (state_generation(state_.load(std::memory_order_acquire)) == seen && !stopping_.load() &&
               spins < kSpinIterations) {
            cpu_relax();
            ++spins;
        }
        if (state_generation(state_.load()) == seen && !stopping_.load()) {
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1);  // seq_cst: a publisher that misses it is seen by the check below
            wake_.wait(lock, [&] { return state_generation(state_.load()) != seen || stopping_.load(); });
            sleepers_.fetch_sub(1);
        }
        if (stopping_.load()) return;
        seen = state_generation(state_.load(std::memory_order_acquire));
        work_on(seen);
    }
}

}  // namespace cactus
