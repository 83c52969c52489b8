// Several sequences in one forward step (server slots): decoding 4 different conversations in one
// batch gives, for each, the same greedy tokens as decoding it alone, on both real models. Prefill
// is done both per sequence (Model::forward on a sequence) and as one mixed batch of two
// sequences; decode steps carry one token of every sequence, so each weight is read once a step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/test_models.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "ops/quant.h"
#include "tokenizer/tokenizer.h"

namespace cactus {
namespace {

constexpr size_t kNewTokens = 16;

const char* const kPrompts[] = {
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "List of the planets in the solar system:\n1. Mercury\n2.",
};

int32_t argmax(const float* logits, size_t n) {
    return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

class MultiSequence : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override {
        file_ = GgufFile::open(testing::test_model_path(GetParam()));
        tokenizer_ = Tokenizer::from_gguf(*file_);
        for (const char* p : kPrompts) prompts_.push_back(tokenizer_->encode(p, true, true));
    }
    std::unique_ptr<Model> load(size_t n_seq) {
        ModelOptions o;
        o.n_ctx = 256;
        o.n_threads = 2;
        o.n_seq = n_seq;
        return Model::load(*file_, o);
    }
    // Greedy continuation of one prompt on a model of one sequence.
    std::vector<int32_t> alone(Model& model, const std::vector<int32_t>& prompt) {
        model.reset();
        std::vector<float> logits;
        model.forward(prompt.data(), prompt.size(), &logits);
        std::vector<int32_t> out;
        const size_t n_vocab = model.info().n_vocab;
        for (size_t i = 0; i < kNewTokens; ++i) {
            out.push_back(argmax(logits.data(), n_vocab));
            model.forward(&out.back(), 1, &logits);
        }
        return out;
    }

    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::vector<std::vector<int32_t>> prompts_;
};

TEST_P(MultiSequence, FourConversationsInOneBatchMatchEachAlone) {
    std::vector<std::vector<int32_t>> want;
    {
        auto single = load(1);
        for (const auto& p : prompts_) want.push_back(alone(*single, p));
    }
    auto model = load(4);
    const size_t n_vocab = model->info().n_vocab;
    std::vector<int32_t> next(4);
    std::vector<float> logits;
    // Sequences 0 and 1: prefilled one by one.
    for (int s = 0; s < 2; ++s) {
        model->forward(prompts_[s].data(), prompts_[s].size(), &logits, nullptr, s);
        next[s] = argmax(logits.data(), n_vocab);
    }
    // Sequences 2 and 3: prefilled together in one mixed batch with explicit positions.
    std::vector<int32_t> tokens, pos, seq;
    for (int s = 2; s < 4; ++s) {
        for (size_t i = 0; i < prompts_[s].size(); ++i) {
            tokens.push_back(prompts_[s][i]);
            pos.push_back(static_cast<int32_t>(i));
            seq.push_back(s);
        }
    }
    Batch prefill;
    prefill.n = tokens.size();
    prefill.tokens = tokens.data();
    prefill.pos = pos.data();
    prefill.seq = seq.data();
    model->decode(prefill, &logits);  // the last token of each sequence: sequences 2, 3
    ASSERT_EQ(logits.size(), 2 * n_vocab);
    next[2] = argmax(logits.data(), n_vocab);
    next[3] = argmax(logits.data() + n_vocab, n_vocab);

    std::vector<std::vector<int32_t>> got(4);
    const int32_t seq_ids[4] = {0, 1, 2, 3};
    for (size_t step = 0; step < kNewTokens; ++step) {
        for (int s = 0; s < 4; ++s) got[s].push_back(next[s]);
        Batch b;
        b.n = 4;
        b.tokens = next.data();
        b.seq = seq_ids;
        model->decode(b, &logits);
        ASSERT_EQ(logits.size(), 4 * n_vocab);
        for (int s = 0; s < 4; ++s) next[s] = argmax(logits.data() + s * n_vocab, n_vocab);
    }
    for (int s = 0; s < 4; ++s) {
        EXPECT_EQ(got[s], want[s]) << "sequence " << s << ": " << kPrompts[s];
        EXPECT_EQ(model->n_past(s), prompts_[s].size() + kNewTokens);
    }
}

TEST_P(MultiSequence, BadBatchesAreErrorsAndLeaveTheCachesAlone) {
    auto model = load(2);
    const std::vector<int32_t>& p = prompts_[0];
    std::vector<float> logits;
    model->forward(p.data(), p.size(), &logits, nullptr, 0);
    const int32_t token = 42;
    const int32_t bad_seq = 2;
    Batch b;
    b.n = 1;
    b.tokens = &token;
    b.seq = &bad_seq;
    EXPECT_THROW(model->decode(b, &logits), Error);  // no sequence 2
    const int32_t wrong_pos = 3;
    const int32_t seq0 = 0;
    b.seq = &seq0;
    b.pos = &wrong_pos;
    EXPECT_THROW(model->decode(b, &logits), Error);  // sequence 0 continues at p.size()
    b.pos = nullptr;
    b.tokens = nullptr;
    EXPECT_THROW(model->decode(b, &logits), Error);  // neither tokens nor embeddings
    EXPECT_EQ(model->n_past(0), p.size());
    EXPECT_EQ(model->n_past(1), 0u);
}

TEST_P(MultiSequence, EmbeddingRowsEqualTheTokensTheyCameFrom) {
    // Media rows are spliced in as embeddings: feeding a token's own embedding row (scaled as the
    // model scales token rows) must give the logits of the token itself.
    auto model = load(1);
    const std::vector<int32_t>& p = prompts_[1];
    std::vector<float> want, got;
    model->forward(p.data(), p.size(), &want);
    const size_t n_embd = model->info().n_embd;
    // Build the rows with a second forward through decode: the first half as tokens, then the rest
    // marked as media rows taken from the embedding table of the file.
    const GgufTensor* table = file_->find_tensor("token_embd.weight");
    ASSERT_NE(table, nullptr);
    std::vector<float> embd(p.size() * n_embd);
    std::vector<int32_t> tokens(p);
    const float scale = model->info().architecture == "gemma3" ? std::sqrt(static_cast<float>(n_embd)) : 1.0f;
    for (size_t i = p.size() / 2; i < p.size(); ++i) {
        std::vector<float> row(n_embd);
        dequantize_row_ref(table->type, row.data(),
                           static_cast<const uint8_t*>(table->data) + p[i] * dtype_row_bytes(table->type, n_embd),
                           n_embd);
        for (size_t d = 0; d < n_embd; ++d) embd[i * n_embd + d] = row[d] * scale;
        tokens[i] = -1;
    }
    model->reset();
    Batch b;
    b.n = p.size();
    b.tokens = tokens.data();
    b.embd = embd.data();
    model->decode(b, &got);
    ASSERT_EQ(got.size(), want.size());
    float max_diff = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
    EXPECT_LT(max_diff, 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(RealModels, MultiSequence, ::testing::Values("smollm2-135m", "gemma3-270m"));

}  // namespace
}  // namespace cactus
