// The thread pool: every index and every element exactly once, for any pool size and job size,
// over many back-to-back jobs (the decode pattern), with slow chunks, and with more threads than
// cores (workers that are not scheduled must not stall the loop or lose work).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace cactus {
namespace {

TEST(ThreadPool, RunCallsEveryIndexOnce) {
    for (int threads : {1, 2, 3, 8}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.size(), threads);
        for (int job = 0; job < 200; ++job) {
            std::vector<std::atomic<int>> calls(static_cast<size_t>(threads));
            for (auto& c : calls) c = 0;
            pool.run([&](int index, int count) {
                ASSERT_EQ(count, threads);
                ASSERT_GE(index, 0);
                ASSERT_LT(index, threads);
                calls[static_cast<size_t>(index)].fetch_add(1);
            });
            for (auto& c : calls) ASSERT_EQ(c.load(), 1) << "threads=" << threads << " job=" << job;
        }
    }
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
    for (int threads : {1, 2, 5}) {
        ThreadPool pool(threads);
        for (size_t n : {0, 1, 2, 3, 7, 8, 9, 31, 1000, 4097}) {
            std::vector<std::atomic<int>> hits(n);
            for (auto& h : hits) h = 0;
            pool.parallel_for(n, [&](size_t begin, size_t end) {
                ASSERT_LT(begin, end);
                ASSERT_LE(end, n);
                for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
            });
            for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
        }
    }
}

TEST(ThreadPool, ParallelForInSeveralChunksPerThreadCoversRangeOnce) {
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (size_t chunks_per_thread : {0, 1, 4, 8}) {
            for (size_t n : {1, 5, 16, 17, 100, 561}) {
                std::vector<std::atomic<int>> hits(n);
                for (auto& h : hits) h = 0;
                std::atomic<size_t> calls{0};
                pool.parallel_for(
                    n,
                    [&](size_t begin, size_t end) {
                        ASSERT_LT(begin, end);
                        ASSERT_LE(end, n);
                        calls.fetch_add(1);
                        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
                    },
                    chunks_per_thread);
                for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
                const size_t most = static_cast<size_t>(threads) * std::max<size_t>(1, chunks_per_thread);
                EXPECT_LE(calls.load(), std::min(n, most)) << "n=" << n << " chunks_per_thread=" << chunks_per_thread;
                // Enough work is cut into the asked number of ranges (the last ones may be empty).
                if (n >= most * most) EXPECT_EQ(calls.load(), most) << "n=" << n;
            }
        }
    }
}

TEST(ThreadPool, ManyShortJobsBackToBack) {
    ThreadPool pool(4);  // more threads than this machine may have cores
    std::atomic<long> total{0};
    const int jobs = 20000;
    for (int j = 0; j < jobs; ++j) {
        pool.parallel_for(16, [&](size_t begin, size_t end) { total.fetch_add(static_cast<long>(end - begin)); });
    }
    EXPECT_EQ(total.load(), 16L * jobs);
}

TEST(ThreadPool, SlowChunksAndIdleSleepStillComplete) {
    ThreadPool pool(3);
    for (int round = 0; round < 3; ++round) {
        std::atomic<int> sum{0};
        pool.run_chunks(10, [&](size_t chunk) {
            if (chunk % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            sum.fetch_add(static_cast<int>(chunk));
        });
        EXPECT_EQ(sum.load(), 45);
        // Long enough for the workers to stop spinning and block on the condition variable.
        std::this_thread::sleep_for(std::chrono::milliseconds(round == 1 ? 50 : 0));
    }
}

// Errors inside a job: a throw on any thread (the caller or a worker) reaches the caller as the
// ordinary exception after every thread has left the job, and the pool keeps working.
void expect_pool_still_works(ThreadPool& pool) {
    std::vector<std::atomic<int>> hits(1000);
    for (auto& h : hits) h = 0;
    pool.parallel_for(hits.size(), [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ErrorOnAnyThreadReachesCallerAfterEveryThreadLeft) {
    const std::thread::id caller = std::this_thread::get_id();
    for (int threads : {2, 3, 4}) {
        ThreadPool pool(threads);
        bool worker_threw = false;
        bool caller_threw = false;
        for (int attempt = 0; attempt < 200 && !(worker_threw && caller_threw); ++attempt) {
            const bool on_worker = !worker_threw;  // first make a worker throw, then the caller
            std::atomic<int> inside{0};
            std::atomic<bool> threw{false};
            try {
                pool.run_chunks(64, [&](size_t chunk) {
                    inside.fetch_add(1);
                    std::this_thread::sleep_for(std::chrono::microseconds(200));
                    const bool here_is_worker = std::this_thread::get_id() != caller;
                    if (chunk >= 1 && here_is_worker == on_worker && !threw.exchange(true)) {
                        inside.fetch_sub(1);
                        throw Error("chunk " + std::to_string(chunk) + " failed");
                    }
                    inside.fetch_sub(1);
                });
                EXPECT_FALSE(threw.load());  // no thread of the wanted kind got a chunk: try again
            } catch (const Error& e) {
                EXPECT_TRUE(threw.load());
                EXPECT_NE(std::string(e.what()).find("failed"), std::string::npos);
                EXPECT_EQ(inside.load(), 0) << "a thread is still inside the job after the rethrow";
                (on_worker ? worker_threw : caller_threw) = true;
            }
            expect_pool_still_works(pool);
        }
        EXPECT_TRUE(worker_threw) << "threads=" << threads;
        EXPECT_TRUE(caller_threw) << "threads=" << threads;
    }
}

TEST(ThreadPool, EveryChunkThrowingGivesOneErrorAndPoolStaysUsable) {
    ThreadPool pool(4);
    for (int round = 0; round < 50; ++round) {
        EXPECT_THROW(pool.parallel_for(100, [&](size_t, size_t) { throw Error("boom"); }), Error);
        EXPECT_THROW(pool.run([&](int index, int) {
            if (index == 3) throw std::runtime_error("three");
        }),
                     std::runtime_error);
        expect_pool_still_works(pool);
    }
}

}  // namespace
}  // namespace cactus
