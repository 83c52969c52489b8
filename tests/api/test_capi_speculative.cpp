// Speculative decoding through the C API (options spec_type, draft_model, draft_max, draft_min):
// greedy replies are the same text with prompt lookup and with a draft model as without them; a
// draft model of another vocabulary and bad values are errors naming the option, after which the
// handle still completes; the response carries the draft counters only where drafting was on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cactus/cactus.h"
#include "common/test_models.h"

namespace cactus::testing {
namespace {

using nlohmann::json;

// A code edit whose reply repeats the quoted function: drafts are accepted often, so a wrong
// verification (a kept row of a rejected draft, a token taken from the wrong logits row) shows.
const std::string kCodeEdit = json::array({{{"role", "user"},
                                            {"content",
                                             "Add type hints to this function, keep its body as it is and return "
                                             "only the code:\n"
                                             "```python\n"
                                             "def total_length(words):\n"
                                             "    total = 0\n"
                                             "    for word in words:\n"
                                             "        total += len(word)\n"
                                             "    return total\n"
                                             "```"}}})
                                  .dump();

// The handle's speculative settings persist across requests, so this suite has its own handle.
class CapiSpeculative : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        model_ = cactus_init(test_model_path("qwen2.5-coder-0.5b").c_str(), nullptr, false);
    }
    static void TearDownTestSuite() {
        cactus_destroy(model_);
        model_ = nullptr;
    }
    void SetUp() override {
        ASSERT_NE(model_, nullptr) << cactus_get_last_error();
        cactus_reset(model_);
    }

    // rc and the response (the error response when rc < 0).
    static int complete(const std::string& options, json* response) {
        std::vector<char> buffer(1 << 16);
        const int rc = cactus_complete(model_, kCodeEdit.c_str(), buffer.data(), buffer.size(), options.c_str(),
                                       nullptr, nullptr, nullptr, nullptr, 0);
        *response = json::parse(buffer.data());
        return rc;
    }
    static json complete_ok(const std::string& options) {
        json r;
        EXPECT_GT(complete(options, &r), 0) << cactus_get_last_error();
        EXPECT_TRUE(r.value("success", false)) << r.dump();
        return r;
    }
    static void expect_error(const std::string& options, const std::vector<std::string>& words) {
        json r;
        EXPECT_EQ(complete(options, &r), CACTUS_ERROR) << options;
        const std::string error = cactus_get_last_error();
        for (const std::string& w : words) EXPECT_NE(error.find(w), std::string::npos) << error;
        EXPECT_FALSE(r.value("success", true));
        EXPECT_EQ(r.value("error", ""), error);
    }

    static cactus_model_t model_;
};

cactus_model_t CapiSpeculative::model_ = nullptr;

const std::string kGreedy = R"("temperature":0,"max_tokens":48)";

TEST_F(CapiSpeculative, GreedyRepliesAreTheSameWithPromptLookupAndWithADraftModel) {
    const json plain = complete_ok("{" + kGreedy + R"(,"spec_type":"off"})");
    const size_t plain_tokens = plain["decode_tokens"];
    EXPECT_GT(plain_tokens, 24u) << plain.dump();
    EXPECT_FALSE(plain.contains("draft_tokens")) << "no drafting was on";
    for (const std::string spec : {R"("spec_type":"ngram")", R"("draft_model":"qwen2.5-coder-0.5b","draft_max":8)",
                                   R"("spec_type":"draft-simple","draft_model":"qwen2.5-coder-0.5b","draft_min":2)"}) {
        cactus_reset(model_);
        const json r = complete_ok("{" + kGreedy + "," + spec + "}");
        EXPECT_EQ(r["response"], plain["response"]) << spec;
        EXPECT_EQ(r["decode_tokens"], plain_tokens) << spec;
        ASSERT_TRUE(r.contains("draft_tokens") && r.contains("draft_accepted")) << r.dump();
        const size_t drafted = r["draft_tokens"], accepted = r["draft_accepted"], steps = r["decode_steps"];
        EXPECT_GT(drafted, 0u) << spec << ": the reply copies the prompt, so something is drafted";
        EXPECT_LE(accepted, drafted) << spec;
        // Prompt lookup is verified only where the measured step costs make it pay: under the
        // sanitizers a step of n tokens costs about n one-token steps, and after its first
        // verification lookup is rightly left unverified (the rule itself is tested on made-up
        // costs in test_speculative_rules.cpp). The draft model drafts until it is judged.
        if (spec.find("ngram") != std::string::npos) continue;
        EXPECT_GT(accepted, 0u) << spec;
        EXPECT_LT(steps, plain_tokens) << spec << ": accepted drafts save model steps";
    }
    // Settings persist on the handle: a request without the keys keeps drafting with the model.
    cactus_reset(model_);
    const json kept = complete_ok("{" + kGreedy + "}");
    EXPECT_EQ(kept["response"], plain["response"]);
    EXPECT_TRUE(kept.contains("draft_tokens"));
    cactus_reset(model_);  // spec_type wins over a draft model given beside it
    const json ngram = complete_ok("{" + kGreedy + R"(,"spec_type":"ngram","draft_model":"qwen2.5-coder-0.5b"})");
    EXPECT_EQ(ngram["response"], plain["response"]);
    EXPECT_TRUE(ngram.contains("draft_tokens"));
    cactus_reset(model_);
    const json off = complete_ok("{" + kGreedy + R"(,"spec_type":"none"})");
    EXPECT_EQ(off["response"], plain["response"]);
    EXPECT_FALSE(off.contains("draft_tokens"));
}

TEST_F(CapiSpeculative, ADraftModelOfAnotherVocabularyIsAnErrorAndTheHandleStillCompletes) {
    complete_ok(R"({"max_tokens":2,"spec_type":"off"})");
    expect_error(R"({"max_tokens":4,"draft_model":"smollm2-135m"})", {"draft_model", "smollm2-135m"});
    json r = complete_ok(R"({"max_tokens":4})");
    EXPECT_FALSE(r.contains("draft_tokens")) << "the failed request changed nothing";
    expect_error(R"({"max_tokens":4,"draft_model":"no-such-model"})", {"draft_model", "no-such-model"});
    complete_ok(R"({"max_tokens":4})");
}

TEST_F(CapiSpeculative, BadValuesAreErrorsNamingTheOption) {
    expect_error(R"({"draft_max":0})", {"draft_max", "between 1 and 64"});
    expect_error(R"({"draft_max":65})", {"draft_max"});
    expect_error(R"({"draft_min":0})", {"draft_min"});
    expect_error(R"({"draft_max":4,"draft_min":5})", {"draft_min", "draft_max"});
    expect_error(R"({"spec_type":"bogus"})", {"spec_type", "bogus", "draft, ngram or off"});
    expect_error(R"({"spec_type":3})", {"spec_type", "string"});
    expect_error(R"({"spec_type":"draft"})", {"spec_type", "draft_model"});
    expect_error(R"({"spec_type":"draft-eagle3"})", {"draft-eagle3"});
    complete_ok(R"({"max_tokens":4})");
}

}  // namespace
}  // namespace cactus::testing
