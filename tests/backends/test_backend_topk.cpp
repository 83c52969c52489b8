// Backend::top_k on every device against top_k_row_ref (ops/ops_ref.h): ids and values exactly
// (the order is total: logit, then lower id), the row maximum exactly, the normalizer within 1e-5
// relative (summation order differs between devices). Rows of odd sizes up to a 262144 vocabulary
// (Gemma 3), with ties straddling rank k, -inf, NaN and signed zeros. Then the sampler on the op's
// output (Sampler::sample_from_top, declining to sample() on the logits as the engine does) draws
// sample()'s tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "backends/backend.h"
#include "core/error.h"
#include "ops/ops_ref.h"
#include "ops/top_candidates.h"
#include "sampling/sampler.h"

namespace cactus {
namespace {

using testing::hold;
using testing::hold_f32;

class BackendTopK : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        try {
            be_ = make_backend(BackendOptions{GetParam(), 2});
        } catch (const Error& e) {
            GTEST_SKIP() << "backend " << GetParam() << " is not usable here: " << e.what();
        }
    }
    std::unique_ptr<Backend> be_;
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0 || (std::isnan(a) && std::isnan(b)); }

// Rows of n_vocab logits in a few shapes: 0 plain random, 1 few distinct values (ties everywhere),
// 2 random with -inf entries and signed zeros, 3 all equal, 4 NaN entries (not the first),
// 5 the first logit NaN.
std::vector<float> make_row(size_t n_vocab, int shape, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::uniform_int_distribution<int> level(-3, 3);
    std::vector<float> row(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) {
        switch (shape) {
            case 1:
                row[i] = static_cast<float>(level(rng));
                break;
            case 2: {
                const uint32_t r = rng() % 8;
                row[i] = r == 0 ? -INFINITY : r == 1 ? -0.0f : r == 2 ? 0.0f : normal(rng);
                break;
            }
            case 3:
                row[i] = 1.5f;
                break;
            default:
                row[i] = normal(rng);
                break;
        }
    }
    if (shape == 4)
        for (size_t i = 1; i < n_vocab; i += 3) row[i] = NAN;
    if (shape == 5) row[0] = NAN;
    return row;
}

void expect_top_k(Backend& be, const std::vector<float>& logits, size_t n_vocab, size_t k, const std::string& what) {
    const size_t n = logits.size() / n_vocab;
    testing::Held x = hold_f32(be, logits, n_vocab);
    testing::Held ids = hold(be, DType::I32, k, n);
    testing::Held vals = hold(be, DType::F32, k, n);
    testing::Held stats = hold(be, DType::F32, 2, n);
    be.top_k(ids.t, vals.t, stats.t, x.t, k);
    std::vector<int32_t> got_ids(n * k);
    std::vector<float> got_vals(n * k), got_stats(n * 2);
    be.download(got_ids.data(), ids.t, got_ids.size() * sizeof(int32_t));
    be.download(got_vals.data(), vals.t, got_vals.size() * sizeof(float));
    be.download(got_stats.data(), stats.t, got_stats.size() * sizeof(float));
    for (size_t r = 0; r < n; ++r) {
        std::vector<int32_t> want_ids(k);
        std::vector<float> want_vals(k), want_stats(2);
        top_k_row_ref(want_ids.data(), want_vals.data(), want_stats.data(), logits.data() + r * n_vocab, n_vocab, k);
        for (size_t j = 0; j < k; ++j) {
            ASSERT_EQ(got_ids[r * k + j], want_ids[j]) << what << " row " << r << " rank " << j;
            ASSERT_TRUE(same_bits(got_vals[r * k + j], want_vals[j]))
                << what << " row " << r << " rank " << j << ": " << got_vals[r * k + j] << " vs " << want_vals[j];
        }
        EXPECT_TRUE(same_bits(got_stats[r * 2], want_stats[0]))
            << what << " row " << r << " max " << got_stats[r * 2] << " vs " << want_stats[0];
        const float sum = got_stats[r * 2 + 1], want = want_stats[1];
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(sum)) << what << " row " << r << " sum " << sum;
        } else {
            EXPECT_NEAR(sum, want, 1e-5 * want) << what << " row " << r;
        }
    }
}

TEST_P(BackendTopK, MatchesReferenceOnOddRows) {
    for (size_t n_vocab : {size_t(1), size_t(7), size_t(1000), size_t(262144)}) {
        for (size_t k : {size_t(1), size_t(5), size_t(40), size_t(256)}) {
            if (k > n_vocab) continue;
            for (int shape = 0; shape < 6; ++shape) {
                const std::string what = "n_vocab " + std::to_string(n_vocab) + " k " + std::to_string(k) + " shape " +
                                         std::to_string(shape);
                expect_top_k(*be_, make_row(n_vocab, shape, static_cast<uint32_t>(n_vocab * 31 + k * 7 + shape)),
                             n_vocab, k, what);
                if (HasFatalFailure()) return;
            }
        }
    }
}

TEST_P(BackendTopK, SeveralRowsAtOnce) {
    const size_t n_vocab = 4099, k = 64;
    std::vector<float> rows;
    for (int shape = 0; shape < 6; ++shape) {
        const std::vector<float> row = make_row(n_vocab, shape, 100u + static_cast<uint32_t>(shape));
        rows.insert(rows.end(), row.begin(), row.end());
    }
    expect_top_k(*be_, rows, n_vocab, k, "six rows");
}

TEST_P(BackendTopK, KOneIsTheFirstArgmax) {
    // -0 and +0 tie (the host's comparisons do not tell them apart): the lower id wins.
    const std::vector<float> row = {-1.0f, -0.0f, 0.0f, -0.0f, -2.0f};
    testing::Held x = hold_f32(*be_, row, row.size());
    testing::Held ids = hold(*be_, DType::I32, 1, 1);
    testing::Held vals = hold(*be_, DType::F32, 1, 1);
    testing::Held stats = hold(*be_, DType::F32, 2, 1);
    be_->top_k(ids.t, vals.t, stats.t, x.t, 1);
    int32_t id = -1;
    be_->download(&id, ids.t, sizeof(id));
    EXPECT_EQ(id, 1);
}

TEST_P(BackendTopK, RejectsBadK) {
    const std::vector<float> row(10, 0.0f);
    testing::Held x = hold_f32(*be_, row, row.size());
    testing::Held ids = hold(*be_, DType::I32, 11, 1);
    testing::Held vals = hold(*be_, DType::F32, 11, 1);
    testing::Held stats = hold(*be_, DType::F32, 2, 1);
    EXPECT_THROW(be_->top_k(ids.t, vals.t, stats.t, x.t, 11), Error);  // k > n_vocab
    EXPECT_THROW(be_->top_k(ids.t, vals.t, stats.t, x.t, 0), Error);
    const std::vector<float> wide(300, 0.0f);
    testing::Held xw = hold_f32(*be_, wide, wide.size());
    testing::Held idw = hold(*be_, DType::I32, 257, 1);
    testing::Held vw = hold(*be_, DType::F32, 257, 1);
    EXPECT_THROW(be_->top_k(idw.t, vw.t, stats.t, xw.t, 257), Error);  // k > 256
}

// The op's results of row 0 as the engine receives them (f32 normalizer).
TopCandidates device_candidates(Backend& be, const std::vector<float>& row, size_t k) {
    testing::Held x = hold_f32(be, row, row.size());
    testing::Held ids = hold(be, DType::I32, k, 1);
    testing::Held vals = hold(be, DType::F32, k, 1);
    testing::Held stats = hold(be, DType::F32, 2, 1);
    be.top_k(ids.t, vals.t, stats.t, x.t, k);
    TopCandidates c;
    c.ids.resize(k);
    c.logits.resize(k);
    float s[2];
    be.download(c.ids.data(), ids.t, k * sizeof(int32_t));
    be.download(c.logits.data(), vals.t, k * sizeof(float));
    be.download(s, stats.t, sizeof(s));
    c.max_logit = s[0];
    c.sum_exp = s[1];
    c.n_vocab = row.size();
    return c;
}

TEST_P(BackendTopK, SamplingFromTheOpDrawsSampleTokens) {
    struct Setting {
        float temperature;
        int top_k;
        float top_p;
        float min_p;
    };
    const Setting settings[] = {{0.0f, 0, 1.0f, 0.0f},
                                {0.8f, 40, 1.0f, 0.0f},
                                {0.8f, 0, 0.9f, 0.0f},
                                {1.0f, 0, 1.0f, 0.1f},
                                {0.7f, 40, 0.95f, 0.05f}};
    for (size_t n_vocab : {size_t(5000), size_t(262144)}) {
        for (const Setting& st : settings) {
            SamplingParams p;
            p.temperature = st.temperature;
            p.top_k = st.top_k;
            p.top_p = st.top_p;
            p.min_p = st.min_p;
            p.seed = 42;
            Sampler full(p), top(p);
            const size_t k = top.top_candidates_wanted();
            ASSERT_GT(k, 0u);
            size_t answered = 0;
            for (uint32_t step = 0; step < 12; ++step) {
                std::vector<float> row = make_row(n_vocab, step % 3 == 2 ? 1 : 0, step * 977u + uint32_t(n_vocab));
                for (float& v : row) v *= step % 2 == 0 ? 1.0f : 3.0f;  // flatter and peakier rows
                std::vector<float> a = row, b = row;
                const int32_t want = full.sample(a);
                int32_t got = -1;
                const bool from_top = top.sample_from_top(device_candidates(*be_, row, k), &got);
                if (!from_top) got = top.sample(b);
                answered += from_top ? 1 : 0;
                ASSERT_EQ(got, want) << "n_vocab " << n_vocab << " temperature " << st.temperature << " step " << step;
                EXPECT_NEAR(top.last_probability(), full.last_probability(), 1e-5 * full.last_probability());
            }
            if (st.top_p == 1.0f && st.min_p == 0.0f) {
                EXPECT_EQ(answered, 12u) << "n_vocab " << n_vocab;
            }
        }
    }
}

std::vector<std::string> devices_under_test() {
    std::vector<std::string> devices = available_devices();
    if (std::find(devices.begin(), devices.end(), "cuda:0") == devices.end()) devices.push_back("cuda:0");
    return devices;
}

std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    std::replace(name.begin(), name.end(), ':', '_');
    return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, BackendTopK, ::testing::ValuesIn(devices_under_test()), device_name);

}  // namespace
}  // namespace cactus
