// The thread pool: every index and every element exactly once, for any pool size and job size,
// over many back-to-back jobs (the decode pattern), with slow chunks, and with more threads than
// cores (workers that are not scheduled must not stall the loop or lose work).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace cactus
