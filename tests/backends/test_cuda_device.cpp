// What only the CUDA backend has: bounded waits (a spinning kernel times out, the handle then
// refuses work) and device selection. Its ops run in the shared suite (test_backend_ops.cpp).
// Without a GPU (CI) the tests report themselves skipped with the reason.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend_test_util.h"

namespace cactus {
namespace {

using testing::hold_f32;
using testing::random_floats;

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
