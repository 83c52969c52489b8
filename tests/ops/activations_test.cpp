// Every ISA's activations against the references, on odd sizes and extreme gates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "backends/cpu/activations.h"
#include "backends/cpu/cpu_features.h"
#include "ops/ops_ref.h"

namespace cactus {
namespace {

std::vector<const ActivationKernels*> tables() { return activation_tables(); }

std::vector<float> gates(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 4.0f);
    const float extremes[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 100.0f, -100.0f, 1e4f, -1e4f, 88.0f, -88.0f, 3e38f, -3e38f};
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = i < std::size(extremes) ? extremes[i] : normal(rng);
    return g;
}

void expect_close(const std::vector<float>& want, const std::vector<float>& got, const char* what) {
    for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_FALSE(std::isnan(got[i])) << what << " at " << i;
        if (got[i] == want[i]) continue;  // also +-inf (gates near 3e38)
        // relative, with an absolute floor far below any activation that matters (the tails of
        // gelu(g) for g << 0 are ~1e-13 and carry the rounding of g's cube)
        ASSERT_NEAR(got[i], want[i], 4e-6f * std::fabs(want[i]) + 1e-9f) << what << " at " << i;
    }
}

// 0.5 x (1 + erf(x / sqrt 2)) in double, written with erfc so that x << 0 keeps its digits.
float gelu_erf_double(float x) {
    const double xd = x;
    return static_cast<float>(0.5 * xd * std::erfc(-xd / std::sqrt(2.0)));
}

TEST(Activations, EveryTableMatchesTheReferenceOnOddSizes) {
    std::mt19937 rng(21);
    for (const ActivationKernels* t : tables()) {
        for (size_t n : {1u, 7u, 8u, 9u, 13u, 64u, 2049u}) {
            SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n);
            const std::vector<float> g = gates(n, rng);
            std::vector<float> u(n);
            std::normal_distribution<float> normal(0.0f, 1.0f);
            for (float& x : u) x = normal(rng);
            std::vector<float> want(n), got(n);
            swiglu_ref(want.data(), g.data(), u.data(), n);
            t->swiglu(got.data(), g.data(), u.data(), n);
            expect_close(want, got, "swiglu");
            geglu_ref(want.data(), g.data(), u.data(), n);
            t->geglu(got.data(), g.data(), u.data(), n);
            expect_close(want, got, "geglu");
            got = g;  // in place (out aliases gate)
            t->geglu(got.data(), got.data(), u.data(), n);
            expect_close(want, got, "geglu in place");
            for (size_t i = 0; i < n; ++i) want[i] = gelu_tanh_ref(g[i]);
            t->gelu_tanh(got.data(), g.data(), n);
            expect_close(want, got, "gelu_tanh");
            for (size_t i = 0; i < n; ++i) want[i] = gelu_erf_double(g[i]);
            t->gelu_erf(got.data(), g.data(), n);
            expect_close(want, got, "gelu_erf");
            got = g;
            t->gelu_erf(got.data(), got.data(), n);
            expect_close(want, got, "gelu_erf in place");
        }
    }
}

TEST(Activations, SoftcapMatchesTheReferenceOnOddSizes) {
    std::mt19937 rng(22);
    for (const ActivationKernels* t : tables()) {
        for (size_t n : {1u, 7u, 8u, 9u, 13u, 64u, 2049u}) {
            for (float cap : {30.0f, 50.0f, 0.5f}) {
                SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n << " cap=" << cap);
                std::vector<float> x = gates(n, rng);
                // Logits near 0 too, where tanh's series takes over from (1 - t) / (1 + t).
                for (size_t i = std::size(x) / 2; i < n; i += 3) x[i] *= 1e-3f;
                std::vector<float> want(n), got(n);
                for (size_t i = 0; i < n; ++i) want[i] = softcap_ref(x[i], cap);
                t->softcap(got.data(), x.data(), n, cap);
                expect_close(want, got, "softcap");
                got = x;
                t->softcap(got.data(), got.data(), n, cap);
                expect_close(want, got, "softcap in place");
            }
        }
    }
}

TEST(Activations, ChosenTableIsTheWidestThisCpuRuns) {
    if (std::getenv("CACTUS_CPU_ISA") != nullptr) GTEST_SKIP() << "CACTUS_CPU_ISA caps the chosen table";
    EXPECT_STREQ(activation_kernels().isa_name, tables().back()->isa_name);
}

}  // namespace
}  // namespace cactus
