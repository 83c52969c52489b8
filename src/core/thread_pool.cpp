#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace cactus {

namespace {
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) {
        workers_.emplace_back([this, i] { worker_loop(i); });
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
}

int ThreadPool::default_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(std::min(n, 8u));
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
    if (n_threads_ == 1) {
        fn(0, 1);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &fn;
        pending_.store(n_threads_ - 1);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    fn(0, n_threads_);
    // Workers always finish: each runs fn once and decrements pending_.
    while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
    if (n == 0) return;
    run([&](int index, int count) {
        size_t chunk = (n + static_cast<size_t>(count) - 1) / static_cast<size_t>(count);
        size_t begin = std::min(n, chunk * static_cast<size_t>(index));
        size_t end = std::min(n, begin + chunk);
        if (begin < end) fn(begin, end);
    });
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
            cpu_relax();
            ++spins;
        }
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load() != seen; });
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stopping_.load()) return;
        (*job_)(index, n_threads_);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace cactus
