#pragma once
// A small persistent thread pool for data-parallel loops. The calling thread takes part in the
// work, so a pool of n threads starts n-1 workers. Workers spin briefly, then sleep on a condition
// variable, so decode steps (many short loops) stay cheap without burning idle cores.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cactus {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs fn(thread_index, n_threads) on every thread of the pool (the caller is index 0) and
    // returns when all are done. Not re-entrant: fn must not call run() on the same pool.
    void run(const std::function<void(int, int)>& fn);

    // Splits [0, n) into contiguous ranges, one per thread: fn(begin, end).
    void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn);

    // Number of threads to use when the user gives none: the physical cores we may run on.
    static int default_threads();

private:
    void worker_loop(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    const std::function<void(int, int)>* job_ = nullptr;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stopping_{false};
};

}  // namespace cactus
