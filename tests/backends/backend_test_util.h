#pragma once
// Helpers of the backend tests: the CUDA backend or a skip with the reason, tensors filled from
// host vectors, random data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <utility>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"

namespace cactus::testing {

// The CUDA backend, or nullptr with *why set (no GPU, no driver, or a build without CUDA).
inline std::unique_ptr<Backend> try_cuda(std::string* why, int timeout_ms = 0) {
    try {
        BackendOptions o;
        o.device = "cuda";
        o.gpu_timeout_ms = timeout_ms;
        return make_backend(o);
    } catch (const Error& e) {
        *why = e.what();
        return nullptr;
    }
}

#define CACTUS_REQUIRE_CUDA(var)                                            \
    std::string why_##var;                                                  \
    std::unique_ptr<Backend> var = ::cactus::testing::try_cuda(&why_##var); \
    if (!var) GTEST_SKIP() << "GPU test skipped: " << why_##var

struct Held {
    std::unique_ptr<Buffer> buffer;
    Tensor t;
};

inline Held hold(Backend& be, DType type, size_t width, size_t rows, const void* data = nullptr) {
    const size_t bytes = dtype_row_bytes(type, width) * rows;
    Held h{be.alloc(bytes), Tensor()};
    h.t = make_tensor(h.buffer.get(), 0, type, width, rows);
    if (data) be.upload(h.t, data, bytes);
    return h;
}

inline Held hold_f32(Backend& be, const std::vector<float>& v, size_t width) {
    return hold(be, DType::F32, width, v.size() / width, v.data());
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Sets environment variables (nullptr: unset) for its lifetime and restores the caller's values
// after: backends read their switches when made.
class EnvOverride {
public:
    EnvOverride(std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (const auto& [name, value] : vars) {
            const char* old = std::getenv(name);
            saved_.push_back({name, old != nullptr, old ? old : ""});
            if (value) {
                setenv(name, value, 1);
            } else {
                unsetenv(name);
            }
        }
    }
    ~EnvOverride() {
        for (const Saved& s : saved_) {
            if (s.was_set) {
                setenv(s.name.c_str(), s.value.c_str(), 1);
            } else {
                unsetenv(s.name.c_str());
            }
        }
    }
    EnvOverride(const EnvOverride&) = delete;
    EnvOverride& operator=(const EnvOverride&) = delete;

private:
    struct Saved {
        std::string name;
        bool was_set;
        std::string value;
    };
    std::vector<Saved> saved_;
};

// Largest |a - b| / (tol_abs + tol_rel * |b|) over the elements (<= 1 passes).
inline double worst_error(const std::vector<float>& a, const std::vector<float>& b, double tol_abs, double tol_rel) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0.0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double e = std::fabs(static_cast<double>(a[i]) - b[i]) / (tol_abs + tol_rel * std::fabs(b[i]));
        if (!(e <= worst)) worst = std::isnan(e) ? 1e30 : e;
    }
    return worst;
}

}  // namespace cactus::testing
