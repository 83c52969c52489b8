#pragma once
// A small persistent thread pool for data-parallel loops. The calling thread takes part in the
// work, so a pool of n threads starts n-1 workers. Work is cut into chunks that threads claim with
// one atomic compare-and-swap each, so a worker that the OS has not scheduled yet (a busy machine)
// never holds the loop up: the others, the caller included, take its chunks. Workers spin briefly
// after each loop, then sleep on a condition variable, so decode steps (many ~100 us loops) start
// without a system call while idle pools burn nothing.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
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

    // Runs fn(index, n_threads) once for every index < n_threads and returns when all are done.
    // Each index runs on one thread (which thread is not fixed: the caller may run several in
    // turn), so per-index scratch is safe. Not re-entrant: fn must not call the same pool.
    //
    // Errors: an exception thrown by fn on any thread (caller or worker) is captured; chunks not
    // yet started are skipped, every thread leaves the job, then the first exception is rethrown
    // on the caller. The pool stays usable. The same holds for parallel_for and run_chunks.
    void run(const std::function<void(int, int)>& fn);

    // Splits [0, n) into contiguous ranges, `chunks_per_thread` per thread (at most n; 0 counts as
    // 1), which whichever thread is free claims: fn(begin, end). One range per thread suits short
    // loops: every claim and completion moves a cache line between cores (~0.1 us), a real cost for
    // the ~10 us loops of decode. Long loops (prefill) take several, so a thread that runs slower
    // (another process on its core, a smaller core) hands part of its share to the others.
    void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t chunks_per_thread = 1);

    // Runs fn(chunk) once for every chunk < n_chunks (n_chunks < 2^20), on any threads.
    void run_chunks(size_t n_chunks, const std::function<void(size_t)>& fn);

    // Number of threads to use when the user gives none: the physical cores we may run on.
    static int default_threads();

private:
    void worker_loop();
    // Claims and runs chunks of the job published as `generation` until none is left.
    void work_on(uint64_t generation);
    // Keeps the first exception of the current job; later chunks of the job are skipped.
    void record_error(std::exception_ptr error);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    // The job: generation (24 bits) | chunk count (20 bits) | next unclaimed chunk (20 bits).
    // Separate cache lines: claims (state_), completions (done_) and the spinning readers of each
    // must not invalidate one another.
    alignas(64) std::atomic<uint64_t> state_{0};
    std::atomic<const std::function<void(size_t)>*> job_{nullptr};
    alignas(64) std::atomic<size_t> done_{0};   // chunks of the current job finished
    alignas(64) std::atomic<int> sleepers_{0};  // workers blocked on wake_
    std::atomic<bool> stopping_{false};
    // The current job's first error (guarded by error_mutex_); failed_ says one was recorded.
    std::mutex error_mutex_;
    std::exception_ptr error_;
    std::atomic<bool> failed_{false};
};

}  // namespace cactus
