// What only the CUDA backend has: bounded waits (a spinning kernel times out, the handle then
// refuses work) and device selection. Its ops run in the shared suite (test_backend_ops.cpp).
// Without a GPU (CI) the tests report themselves skipped with the reason.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend_test_util.h"

namespace cactus {
namespace {

using testing::hold_f32;
using testing::random_floats;

// A spinning kernel cannot be stopped: it runs on after its handle broke, and the work queued behind it
// (its download) can hold up the next test's kernels on the same GPU past their deadline. Each fault
// test waits out its spin before it ends (also when it fails).
struct SpinWaiter {
    std::chrono::steady_clock::time_point until;
    ~SpinWaiter() { std::this_thread::sleep_until(until); }
};
constexpr std::chrono::milliseconds kSpinAndMargin(4300);

TEST(CudaFault, SpinningKernelTimesOutThenHandleRefusesAndDestroyReturns) {
    // The test-only hook: the first download enqueues a kernel spinning 4 s against a 1 s deadline.
    setenv("CACTUS_CUDA_FAULT_SPIN_MS", "4000", 1);
    std::string why;
    std::unique_ptr<Backend> be = testing::try_cuda(&why, 1000);
    unsetenv("CACTUS_CUDA_FAULT_SPIN_MS");
    if (!be) GTEST_SKIP() << "GPU test skipped: " << why;
    const std::vector<float> x = random_floats(64, 1);
    const testing::Held xd = hold_f32(*be, x, 64);
    const auto start = std::chrono::steady_clock::now();
    const SpinWaiter waiter{start + kSpinAndMargin};
    std::vector<float> out(64);
    try {
        be->download(out.data(), xd.t, 64 * sizeof(float));
        FAIL() << "download returned although the GPU was spinning";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gpu_timeout_ms"), std::string::npos) << e.what();
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 2.0) << "the call must return within the deadline + 1 s";
    EXPECT_GE(waited, 0.9);
    try {
        be->scale(xd.t, xd.t, 2.0f);
        FAIL() << "a broken handle accepted work";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("refuses"), std::string::npos) << e.what();
    }
    const auto destroy = std::chrono::steady_clock::now();
    be.reset();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - destroy).count(), 1.0);
}

TEST(CudaFault, SpinInsideAReplayedGraphTimesOutAndDestroyReturns) {
    // Every download enqueues the hook's kernel (0 ms until the 5th download): steps 1-2 run eagerly
    // and capture, 3-4 replay the graph, and in step 5 the replayed graph spins 4 s against 1 s.
    setenv("CACTUS_CUDA_FAULT_SPIN_MS", "4000", 1);
    setenv("CACTUS_CUDA_FAULT_SPIN_AT", "5", 1);
    setenv("CACTUS_CUDA_GRAPHS", "1", 1);
    std::string why;
    std::unique_ptr<Backend> be = testing::try_cuda(&why, 1000);
    unsetenv("CACTUS_CUDA_GRAPHS");
    unsetenv("CACTUS_CUDA_FAULT_SPIN_MS");
    unsetenv("CACTUS_CUDA_FAULT_SPIN_AT");
    if (!be) GTEST_SKIP() << "GPU test skipped: " << why;
    const std::vector<float> x = random_floats(256, 2);
    const testing::Held xd = hold_f32(*be, x, 256);
    be->synchronize(std::chrono::milliseconds(1000));  // the steps below start alike
    std::vector<float> out(256);
    const auto step = [&] {
        be->upload(xd.t, x.data(), x.size() * sizeof(float));
        for (int i = 0; i < 12; ++i) be->scale(xd.t, xd.t, 1.0f + 0.01f * static_cast<float>(i));
        be->download(out.data(), xd.t, out.size() * sizeof(float));
    };
    for (int i = 0; i < 4; ++i) step();
    EXPECT_GE(be->counters().graph_replays, 2u) << "steps 3 and 4 should have replayed a graph";
    const auto start = std::chrono::steady_clock::now();
    const SpinWaiter waiter{start + kSpinAndMargin};
    try {
        step();
        FAIL() << "the step returned although its graph was spinning";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gpu_timeout_ms"), std::string::npos) << e.what();
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 2.0) << "the call must return within the deadline + 1 s";
    EXPECT_GE(be->counters().graph_replays, 3u) << "the spinning step was not a graph replay";
    EXPECT_THROW(step(), Error);
    const auto destroy = std::chrono::steady_clock::now();
    be.reset();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - destroy).count(), 1.0);
}

TEST(CudaGraphs, RepeatedStepReplaysWithNewInputsAndMatchesEager) {
    // Six steps with the same launches and new input bytes each time: with graphs, steps 1-2 run
    // eagerly (2 captures), 3-6 replay and must read the new inputs; without graphs nothing replays.
    std::string why;
    const std::vector<float> x = random_floats(1000, 3);
    std::vector<std::vector<float>> outs;
    for (const char* graphs : {"1", "0"}) {
        setenv("CACTUS_CUDA_GRAPHS", graphs, 1);
        std::unique_ptr<Backend> be = testing::try_cuda(&why, 5000);
        unsetenv("CACTUS_CUDA_GRAPHS");
        if (!be) GTEST_SKIP() << "GPU test skipped: " << why;
        const testing::Held xd = hold_f32(*be, x, 1000);
        be->synchronize(std::chrono::milliseconds(5000));  // the steps below start alike
        const BackendCounters before = be->counters();
        std::vector<float> in(1000), out(1000), all;
        for (int rep = 0; rep < 6; ++rep) {
            for (size_t i = 0; i < in.size(); ++i) in[i] = x[i] * static_cast<float>(rep + 1);
            be->upload(xd.t, in.data(), in.size() * sizeof(float));
            for (int i = 0; i < 10; ++i) be->scale(xd.t, xd.t, 0.5f + 0.1f * static_cast<float>(i));
            be->download(out.data(), xd.t, out.size() * sizeof(float));
            all.insert(all.end(), out.begin(), out.end());
        }
        const BackendCounters c = be->counters();
        EXPECT_EQ(c.kernels - before.kernels, 60u);
        EXPECT_EQ(c.graph_replays - before.graph_replays, graphs[0] == '1' ? 4u : 0u);
        EXPECT_EQ(c.graph_captures - before.graph_captures, graphs[0] == '1' ? 1u : 0u);
        outs.push_back(all);
    }
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)), 0);
}

TEST(CudaSelection, UnknownDeviceIsAClearError) {
    BackendOptions o;
    o.device = "cuda:77";
    try {
        make_backend(o);
        FAIL() << "cuda:77 was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cuda:77"), std::string::npos) << e.what();
    }
    o.device = "cudax";
    EXPECT_THROW(make_backend(o), Error);
}

}  // namespace
}  // namespace cactus

namespace cactus {
namespace {}  // namespace
}  // namespace cactus
