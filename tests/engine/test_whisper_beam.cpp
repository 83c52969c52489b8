// Whisper beam search on the real tiny.en model: sequences decoded together in cache slots give the
// logits each gives alone (forks included), one beam is greedy decoding, bad settings are errors;
// text-only decoding (without_timestamps) samples no timestamp token.
// The transcripts themselves are compared with faster-whisper's beam search in
// test_whisper_oracle.py.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "common/test_models.h"
#include "core/error.h"
#include "engine/media/whisper_transcribe.h"

namespace cactus {
namespace {

// 30 s of a deterministic signal: tones gliding over low noise (a window the encoder can run).
std::vector<float> test_audio() {
    std::vector<float> x(30 * 16000);
    uint32_t seed = 7;
    double phase = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        seed = seed * 1664525u + 1013904223u;
        const double f = 180.0 + 250.0 * std::sin(2 * M_PI * static_cast<double>(i) / (2.3 * 16000));
        phase += 2 * M_PI * f / 16000;
        const double envelope = (i / 8000) % 3 == 2 ? 0.05 : 1.0;  // syllable-like bursts
        x[i] = static_cast<float>(0.3 * envelope * std::sin(phase) + 0.02 * ((seed >> 8) / 16777216.0 - 0.5));
    }
    return x;
}

class WhisperBeam : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        BackendOptions bo;
        bo.n_threads = 2;
        backend_ = make_backend(bo).release();
        model_ = new WhisperModel(testing::test_model_path("whisper-tiny.en"), *backend_);
        // one window of the signal through the encoder, as transcribe() does
        const std::vector<float> audio = test_audio();
        TranscribeOptions o;
        o.temperatures = {0.0f};
        transcribe(*model_, audio.data(), audio.size(), o);
    }
    static void TearDownTestSuite() {
        delete model_;
        delete backend_;
    }
    static std::vector<int32_t> prompt() { return {model_->vocab().sot}; }
    // <|startofprev|> with some previous text, then <|startoftranscript|>: longer outputs.
    static std::vector<int32_t> prompt_with_text() {
        const WhisperVocab& v = model_->vocab();
        std::vector<int32_t> p = {v.sot_prev};
        for (const char* word : {"\xc4\xa0The", "\xc4\xa0sun", "\xc4\xa0rose", "\xc4\xa0over", "\xc4\xa0the",
                                 "\xc4\xa0hill", "."}) {  // byte-level BPE: "\xc4\xa0" is a space
            for (size_t id = 0; id < v.tokens.size(); ++id) {
                if (v.tokens[id] == word) p.push_back(static_cast<int32_t>(id));
            }
        }
        EXPECT_EQ(p.size(), 8u);
        p.push_back(v.sot);
        return p;
    }

    // Logits of `tokens` run one at a time after the prompt in slot 0.
    static std::vector<float> alone(const std::vector<int32_t>& tokens) {
        const std::vector<int32_t> p = prompt();
        std::vector<float> logits = model_->decode(p.data(), p.size(), 0);
        for (size_t i = 0; i < tokens.size(); ++i) logits = model_->decode(&tokens[i], 1, p.size() + i);
        return logits;
    }

    static Backend* backend_;
    static WhisperModel* model_;
};

Backend* WhisperBeam::backend_ = nullptr;
WhisperModel* WhisperBeam::model_ = nullptr;

void expect_close(const float* a, const std::vector<float>& b, const char* what) {
    double worst = 0.0;
    for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    EXPECT_LT(worst, 2e-3) << what;  // batched and single-row matmuls round differently
}

TEST_F(WhisperBeam, SlotsDecodedTogetherMatchEachAlone) {
    const size_t n_vocab = model_->hparams().n_vocab;
    const std::vector<int32_t> p = prompt();
    const int32_t tb = model_->vocab().timestamp_begin;
    const int32_t a = tb, b = tb + 3, c = tb + 10, d = 440, e = 1000;  // timestamps, then text tokens

    model_->reserve_slots(3);
    ASSERT_GE(model_->n_slots(), 3u);
    model_->decode(p.data(), p.size(), 0);  // the prompt in slot 0, forked into 1 and 2
    model_->copy_slot(1, 0, p.size());
    model_->copy_slot(2, 0, p.size());
    const int32_t step1[3] = {a, b, c};
    const size_t slots1[3] = {2, 0, 1};  // any slot order
    const std::vector<float> got1 = model_->decode_slots(step1, slots1, 3, p.size());
    ASSERT_EQ(got1.size(), 3 * n_vocab);

    // c (slot 1) forks: its rows into slot 0 (whose sequence ends); d and e follow c
    model_->copy_slot(0, 1, p.size() + 1);
    const int32_t step2[2] = {d, e};
    const size_t slots2[2] = {1, 0};
    const std::vector<float> got2 = model_->decode_slots(step2, slots2, 2, p.size() + 1);

    expect_close(got1.data(), alone({a}), "a");
    expect_close(got1.data() + n_vocab, alone({b}), "b");
    expect_close(got1.data() + 2 * n_vocab, alone({c}), "c");
    expect_close(got2.data(), alone({c, d}), "c d");
    expect_close(got2.data() + n_vocab, alone({c, e}), "c e");
}

TEST_F(WhisperBeam, OneBeamIsGreedy) {
    TranscribeOptions o;
    o.beam_size = 1;
    for (const std::vector<int32_t>& p : {prompt(), prompt_with_text()}) {
        const std::vector<int32_t> greedy = decode_window(*model_, p, o, false);
        const std::vector<int32_t> beam = decode_window(*model_, p, o, true);
        ASSERT_GE(greedy.size(), 4u);  // a timestamp, text, a timestamp
        EXPECT_EQ(beam, greedy);
    }
}

TEST_F(WhisperBeam, BeamsKeepTheTimestampRules) {
    TranscribeOptions o;
    o.beam_size = 5;
    const std::vector<int32_t> t = decode_window(*model_, prompt(), o, true);
    const int32_t tb = model_->vocab().timestamp_begin;
    ASSERT_FALSE(t.empty());
    EXPECT_GE(t.front(), tb);       // starts with a timestamp
    EXPECT_LE(t.front(), tb + 50);  // no later than 1 s
    int32_t last_ts = tb;
    for (size_t i = 0; i < t.size(); ++i) {
        EXPECT_NE(t[i], model_->vocab().eot);
        if (t[i] >= tb) {
            EXPECT_GE(t[i], last_ts) << "timestamps decrease at " << i;
            last_ts = t[i];
        }
        for (int32_t s : model_->vocab().suppress) EXPECT_NE(t[i], s) << "suppressed token at " << i;
    }
}

TEST_F(WhisperBeam, BadSettingsAreErrors) {
    const std::vector<float> audio(16000, 0.0f);
    for (size_t beam : {size_t{0}, kMaxBeamSize + 1, size_t{1} << 40}) {
        TranscribeOptions o;
        o.beam_size = beam;
        try {
            transcribe(*model_, audio.data(), audio.size(), o);
            ADD_FAILURE() << "beam_size " << beam << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("beam_size"), std::string::npos) << e.what();
        }
    }
    TranscribeOptions o;
    o.patience = 0.0f;
    EXPECT_THROW(transcribe(*model_, audio.data(), audio.size(), o), Error);
    o.patience = NAN;
    EXPECT_THROW(transcribe(*model_, audio.data(), audio.size(), o), Error);
    o.patience = 0.05f;  // 5 beams: round(0.25) = 0 finished hypotheses to wait for
    o.beam_size = 5;
    EXPECT_THROW(transcribe(*model_, audio.data(), audio.size(), o), Error);
    o = TranscribeOptions();
    o.length_penalty = -1.0f;
    EXPECT_THROW(transcribe(*model_, audio.data(), audio.size(), o), Error);
    EXPECT_THROW(model_->reserve_slots(WhisperModel::kMaxSlots + 1), Error);
    const int32_t tok = 0;
    const size_t slot = model_->n_slots();
    EXPECT_THROW(model_->decode_slots(&tok, &slot, 1, 1), Error);  // a slot that does not exist
}

// without_timestamps: greedy and beam search after <|notimestamps|> sample text tokens only, where
// the same window with timestamps starts with one (the rules make the first token a timestamp), and
// transcribe() gives one segment for the window.
TEST_F(WhisperBeam, WithoutTimestampsSamplesTextOnly) {
    const WhisperVocab& v = model_->vocab();
    TranscribeOptions o;
    o.temperatures = {0.0f};
    const std::vector<int32_t> timed = decode_window(*model_, prompt(), o, false);
    ASSERT_FALSE(timed.empty());
    EXPECT_GE(timed.front(), v.timestamp_begin) << "with timestamps the window starts with one";
    o.without_timestamps = true;
    const std::vector<int32_t> plain_prompt = {v.sot, v.no_timestamps};
    for (const bool beam : {false, true}) {
        o.beam_size = beam ? 3 : 1;
        const std::vector<int32_t> plain = decode_window(*model_, plain_prompt, o, beam);
        ASSERT_FALSE(plain.empty()) << (beam ? "beam" : "greedy");
        for (int32_t t : plain) EXPECT_LT(t, v.timestamp_begin) << (beam ? "beam" : "greedy");
    }
    o.beam_size = 1;
    const std::vector<float> audio = test_audio();
    const Transcript t = transcribe(*model_, audio.data(), audio.size(), o);  // the same window again
    EXPECT_EQ(t.metrics.windows, 1u);
    ASSERT_LE(t.segments.size(), 1u);
    for (const TranscriptSegment& s : t.segments) {
        EXPECT_EQ(s.start, 0.0);
        EXPECT_NEAR(s.end, 30.0, 0.02);
        for (int32_t id : s.tokens) EXPECT_LT(id, v.timestamp_begin);
    }
}

}  // namespace
}  // namespace cactus
