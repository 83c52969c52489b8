#include "models/audio/whisper_transcribe.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "models/audio/log_mel.h"

namespace cactus {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTimePrecision = 0.02;  // seconds per timestamp token
constexpr size_t kInputStride = 2;       // mel frames per encoder position
constexpr double kFrameSeconds = 0.01;   // seconds per mel frame

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// log_softmax in place; returns nothing, leaves -inf where the logit was -inf.
void log_softmax(std::vector<float>& x) {
    float max = kNegInf;
    for (float v : x) max = std::max(max, v);
    double sum = 0.0;
    for (float v : x) sum += v == kNegInf ? 0.0 : std::exp(static_cast<double>(v - max));
    const float log_sum = max + static_cast<float>(std::log(sum));
    for (float& v : x) v = v == kNegInf ? kNegInf : v - log_sum;
}

// The logit rules of one decoding step; `sampled` holds the tokens generated so far in the window.
void apply_rules(std::vector<float>& logits, const std::vector<int32_t>& sampled, const WhisperVocab& v,
                 const std::vector<int32_t>& suppress, int max_initial_index) {
    const size_t n = logits.size();
    const size_t tb = static_cast<size_t>(v.timestamp_begin);
    const size_t eot = static_cast<size_t>(v.eot);
    for (int32_t id : suppress) logits[static_cast<size_t>(id)] = kNegInf;
    if (sampled.empty()) {
        for (int32_t id : v.suppress_begin) logits[static_cast<size_t>(id)] = kNegInf;
    }
    logits[static_cast<size_t>(v.no_timestamps)] = kNegInf;
    const size_t k = sampled.size();
    const bool last_ts = k >= 1 && sampled[k - 1] >= v.timestamp_begin;
    const bool penult_ts = k < 2 || sampled[k - 2] >= v.timestamp_begin;
    if (last_ts) {  // timestamps come in pairs, except right before <|endoftext|>
        if (penult_ts) {
            std::fill(logits.begin() + static_cast<long>(tb), logits.end(), kNegInf);
        } else {
            std::fill(logits.begin(), logits.begin() + static_cast<long>(eot), kNegInf);
        }
    }
    for (size_t i = k; i-- > 0;) {  // timestamps never decrease
        if (sampled[i] < v.timestamp_begin) continue;
        size_t last = static_cast<size_t>(sampled[i]) + ((last_ts && !penult_ts) ? 0 : 1);
        std::fill(logits.begin() + static_cast<long>(tb), logits.begin() + static_cast<long>(std::min(last, n)),
                  kNegInf);
        break;
    }
    if (k == 0) {  // the first token is a timestamp, no later than max_initial_timestamp
        std::fill(logits.begin(), logits.begin() + static_cast<long>(tb), kNegInf);
        if (max_initial_index >= 0) {
            const size_t last_allowed = tb + static_cast<size_t>(max_initial_index);
            if (last_allowed + 1 < n)
                std::fill(logits.begin() + static_cast<long>(last_allowed + 1), logits.end(), kNegInf);
        }
    }
    // if the timestamps together are likelier than any text token, emit a timestamp
    std::vector<float> lp = logits;
    log_softmax(lp);
    float max_text = kNegInf;
    for (size_t i = 0; i < tb; ++i) max_text = std::max(max_text, lp[i]);
    float ts_max = kNegInf;
    for (size_t i = tb; i < n; ++i) ts_max = std::max(ts_max, lp[i]);
    if (ts_max != kNegInf) {
        double s = 0.0;
        for (size_t i = tb; i < n; ++i) s += lp[i] == kNegInf ? 0.0 : std::exp(static_cast<double>(lp[i] - ts_max));
        const float ts_lp = ts_max + static_cast<float>(std::log(s));
        if (ts_lp > max_text) std::fill(logits.begin(), logits.begin() + static_cast<long>(tb), kNegInf);
    }
}

struct WindowResult {
    std::vector<int32_t> tokens;  // generated, without <|endoftext|>
    double sum_logprob = 0.0;
    float avg_logprob = 0.0f;
    float no_speech_prob = 0.0f;
    float temperature = 0.0f;
    float compression = 0.0f;
};

// Picks the next token from the processed logits: argmax at temperature 0, else a sample of
// softmax(logits / T). Returns the token and its log-probability.
std::pair<int32_t, float> pick(std::vector<float>& logits, float temperature, std::mt19937_64& rng) {
    if (temperature > 0.0f) {
        for (float& v : logits) v = v == kNegInf ? kNegInf : v / temperature;
    }
    log_softmax(logits);
    size_t best = 0;
    if (temperature <= 0.0f) {
        for (size_t i = 1; i < logits.size(); ++i) {
            if (logits[i] > logits[best]) best = i;
        }
    } else {
        std::uniform_real_distribution<double> u(0.0, 1.0);
        double r = u(rng), acc = 0.0;
        best = logits.size() - 1;
        for (size_t i = 0; i < logits.size(); ++i) {
            if (logits[i] == kNegInf) continue;
            acc += std::exp(static_cast<double>(logits[i]));
            if (acc >= r) {
                best = i;
                break;
            }
        }
    }
    return {static_cast<int32_t>(best), logits[best]};
}

class WindowDecoder {
public:
    WindowDecoder(WhisperModel& model, const TranscribeOptions& o, TranscribeMetrics& m)
        : model_(model), opt_(o), metrics_(m), rng_(o.seed) {
        const WhisperVocab& v = model.vocab();
        suppress_ = v.suppress;
        for (int32_t id : {v.transcribe, v.translate, v.sot, v.sot_prev, v.sot_lm}) suppress_.push_back(id);
        max_initial_index_ = static_cast<int>(std::lround(o.max_initial_timestamp / kTimePrecision));
    }

    // Runs the prompt once; the first-step logits and the no-speech probability are kept.
    void start(const std::vector<int32_t>& prompt, size_t sot_index) {
        const Clock::time_point t0 = Clock::now();
        prompt_len_ = prompt.size();
        first_logits_ = model_.decode(prompt.data(), prompt.size(), 0);
        std::vector<float> at_sot = model_.logits_of_row(sot_index);
        log_softmax(at_sot);
        no_speech_prob_ = std::exp(at_sot[static_cast<size_t>(model_.vocab().no_speech)]);
        metrics_.decode_ms += ms_since(t0);
    }

    WindowResult run(float temperature) {
        const Clock::time_point t0 = Clock::now();
        const WhisperVocab& v = model_.vocab();
        WindowResult r;
        r.temperature = temperature;
        r.no_speech_prob = no_speech_prob_;
        std::vector<float> logits = first_logits_;
        const size_t max_pos = model_.hparams().n_text_ctx;
        bool ended = false;
        while (prompt_len_ + r.tokens.size() < max_pos) {
            apply_rules(logits, r.tokens, v, suppress_, max_initial_index_);
            const auto [token, lp] = pick(logits, temperature, rng_);
            r.sum_logprob += lp;
            if (token == v.eot) {
                ended = true;
                break;
            }
            r.tokens.push_back(token);
            if (prompt_len_ + r.tokens.size() >= max_pos) break;
            logits = model_.decode(&token, 1, prompt_len_ + r.tokens.size() - 1);
            ++metrics_.decoded_tokens;
        }
        (void)ended;
        r.avg_logprob = static_cast<float>(r.sum_logprob / static_cast<double>(r.tokens.size() + 1));
        r.compression = compression_ratio(v.decode(r.tokens));
        metrics_.decode_ms += ms_since(t0);
        return r;
    }

    // faster-whisper's generate_with_fallback.
    WindowResult with_fallback() {
        std::vector<WindowResult> all, below_cr;
        for (float t : opt_.temperatures) {
            WindowResult best;
            const size_t tries = t > 0.0f ? std::max<size_t>(1, opt_.best_of) : 1;
            for (size_t i = 0; i < tries; ++i) {
                WindowResult r = run(t);
                const double score = r.sum_logprob / std::max<size_t>(1, r.tokens.size());
                const double best_score = best.sum_logprob / std::max<size_t>(1, best.tokens.size());
                if (i == 0 || score > best_score) best = r;
            }
            all.push_back(best);
            bool fallback = false;
            if (opt_.compression_ratio_threshold > 0.0f) {
                if (best.compression > opt_.compression_ratio_threshold) {
                    fallback = true;
                } else {
                    below_cr.push_back(best);
                }
            }
            if (best.avg_logprob < opt_.log_prob_threshold) fallback = true;
            if (opt_.no_speech_threshold > 0.0f && best.no_speech_prob > opt_.no_speech_threshold &&
                best.avg_logprob < opt_.log_prob_threshold) {
                fallback = false;  // silence
            }
            if (!fallback) return best;
        }
        const std::vector<WindowResult>& pool = below_cr.empty() ? all : below_cr;
        WindowResult pick_best = pool.front();
        for (const WindowResult& r : pool) {
            if (r.avg_logprob > pick_best.avg_logprob) pick_best = r;
        }
        pick_best.temperature = opt_.temperatures.empty() ? 0.0f : opt_.temperatures.back();
        return pick_best;
    }

private:
    WhisperModel& model_;
    const TranscribeOptions& opt_;
    TranscribeMetrics& metrics_;
    std::mt19937_64 rng_;
    std::vector<int32_t> suppress_;
    int max_initial_index_ = 50;
    size_t prompt_len_ = 0;
    std::vector<float> first_logits_;
    float no_speech_prob_ = 0.0f;
};

struct Split {
    std::vector<TranscriptSegment> segments;
    size_t seek = 0;
};

// faster-whisper's _split_segments_by_timestamps.
Split split_by_timestamps(const std::vector<int32_t>& tokens, const WhisperVocab& v, double time_offset,
                          size_t segment_size, double segment_duration, size_t seek) {
    Split out;
    const int32_t tb = v.timestamp_begin;
    const size_t n = tokens.size();
    const bool single_ending = n >= 2 && tokens[n - 2] < tb && tokens[n - 1] >= tb;
    std::vector<size_t> slices;
    for (size_t i = 1; i < n; ++i) {
        if (tokens[i] >= tb && tokens[i - 1] >= tb) slices.push_back(i);
    }
    if (!slices.empty()) {
        if (single_ending) slices.push_back(n);
        size_t last = 0;
        for (size_t cur : slices) {
            TranscriptSegment s;
            s.tokens.assign(tokens.begin() + static_cast<long>(last), tokens.begin() + static_cast<long>(cur));
            s.start = time_offset + (s.tokens.front() - tb) * kTimePrecision;
            s.end = time_offset + (s.tokens.back() - tb) * kTimePrecision;
            out.segments.push_back(std::move(s));
            last = cur;
        }
        if (single_ending) {
            out.seek = seek + segment_size;
        } else {
            out.seek = seek + static_cast<size_t>(tokens[last - 1] - tb) * kInputStride;
        }
        return out;
    }
    double duration = segment_duration;
    int32_t last_ts = -1;
    for (int32_t t : tokens) {
        if (t >= tb) last_ts = t;
    }
    if (last_ts >= 0 && last_ts != tb) duration = (last_ts - tb) * kTimePrecision;
    TranscriptSegment s;
    s.tokens = tokens;
    s.start = time_offset;
    s.end = time_offset + duration;
    out.segments.push_back(std::move(s));
    out.seek = seek + segment_size;
    return out;
}

bool blank(const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// Language of the window last encoded: softmax over the language tokens after <|startoftranscript|>.
std::pair<int32_t, float> detect_language(WhisperModel& model) {
    const WhisperVocab& v = model.vocab();
    std::vector<float> logits = model.decode(&v.sot, 1, 0);
    std::vector<float> lang;
    for (int32_t id : v.lang_ids) lang.push_back(logits[static_cast<size_t>(id)]);
    log_softmax(lang);
    size_t best = 0;
    for (size_t i = 1; i < lang.size(); ++i) {
        if (lang[i] > lang[best]) best = i;
    }
    return {v.lang_ids[best], std::exp(lang[best])};
}

}  // namespace

float compression_ratio(const std::string& text) {
    if (text.empty()) return 0.0f;
    uLongf size = compressBound(static_cast<uLong>(text.size()));
    std::vector<Bytef> out(size);
    if (compress2(out.data(), &size, reinterpret_cast<const Bytef*>(text.data()), static_cast<uLong>(text.size()),
                  Z_DEFAULT_COMPRESSION) != Z_OK) {
        fail("compression_ratio: zlib failed on %zu bytes", text.size());
    }
    return static_cast<float>(text.size()) / static_cast<float>(size);
}

std::string Transcript::text() const {
    std::string out;
    for (const TranscriptSegment& s : segments) out += s.text;
    return out;
}

Transcript transcribe(WhisperModel& model, const float* samples, size_t n_samples, const TranscribeOptions& options,
                      const SegmentCallback& on_segment) {
    const Clock::time_point t_start = Clock::now();
    const WhisperHparams& hp = model.hparams();
    const WhisperVocab& v = model.vocab();
    Transcript out;
    out.metrics.audio_seconds = static_cast<double>(n_samples) / 16000.0;
    if (n_samples == 0) fail("transcribe: no audio samples");

    Clock::time_point t0 = Clock::now();
    const LogMel mel = log_mel(samples, n_samples, model.mel_filters(), hp.n_mels);
    out.metrics.mel_ms = ms_since(t0);
    const size_t content_frames = mel.n_frames - 1;
    const size_t window_frames = hp.n_frames();

    int32_t language = -1;
    if (v.multilingual) {
        if (!options.language.empty() && options.language != "auto") {
            language = v.language_token(options.language);
            if (language < 0) fail("transcribe: unknown language '%s'", options.language.c_str());
        }
    } else if (!options.language.empty() && options.language != "auto" && options.language != "en") {
        fail("transcribe: this model is English-only; language '%s' is not available", options.language.c_str());
    }
    out.language = "en";

    WindowDecoder decoder(model, options, out.metrics);
    std::vector<float> window(window_frames * hp.n_mels);
    std::vector<int32_t> all_tokens;
    size_t prompt_reset_since = 0;
    size_t seek = 0;
    while (seek < content_frames) {
        const double time_offset = static_cast<double>(seek) * kFrameSeconds;
        const size_t segment_size = std::min(window_frames, content_frames - seek);
        const double segment_duration = static_cast<double>(segment_size) * kFrameSeconds;
        std::fill(window.begin(), window.end(), 0.0f);  // [window_frames, n_mels], zero-padded
        std::copy(mel.data.begin() + static_cast<long>(seek * hp.n_mels),
                  mel.data.begin() + static_cast<long>((seek + segment_size) * hp.n_mels), window.begin());
        t0 = Clock::now();
        model.encode(window.data());
        out.metrics.encode_ms += ms_since(t0);
        ++out.metrics.windows;
        if (v.multilingual && language < 0) {
            const auto [id, p] = detect_language(model);
            language = id;
            out.language_probability = p;
        }
        if (v.multilingual) {
            for (size_t i = 0; i < v.lang_ids.size(); ++i) {
                if (v.lang_ids[i] == language) out.language = v.lang_codes[i];
            }
        }

        std::vector<int32_t> prompt;
        const size_t max_prev = hp.n_text_ctx / 2 - 1;
        if (all_tokens.size() > prompt_reset_since) {
            prompt.push_back(v.sot_prev);
            const size_t n_prev = std::min(max_prev, all_tokens.size() - prompt_reset_since);
            prompt.insert(prompt.end(), all_tokens.end() - static_cast<long>(n_prev), all_tokens.end());
        }
        const size_t sot_index = prompt.size();
        prompt.push_back(v.sot);
        if (v.multilingual) {
            prompt.push_back(language);
            prompt.push_back(options.translate ? v.translate : v.transcribe);
        }
        decoder.start(prompt, sot_index);
        const WindowResult r = decoder.with_fallback();

        if (options.no_speech_threshold > 0.0f && r.no_speech_prob > options.no_speech_threshold &&
            !(r.avg_logprob > options.log_prob_threshold)) {
            seek += segment_size;  // silence: skip the window
            continue;
        }
        Split split = split_by_timestamps(r.tokens, v, time_offset, segment_size, segment_duration, seek);
        seek = split.seek > seek ? split.seek : seek + segment_size;  // always move forward
        for (TranscriptSegment& s : split.segments) {
            s.text = v.decode(s.tokens);
            if (s.start == s.end || blank(s.text)) continue;
            s.avg_logprob = r.avg_logprob;
            s.no_speech_prob = r.no_speech_prob;
            s.temperature = r.temperature;
            all_tokens.insert(all_tokens.end(), s.tokens.begin(), s.tokens.end());
            if (on_segment) on_segment(s);
            out.segments.push_back(std::move(s));
        }
        if (!options.condition_on_previous_text || r.temperature > 0.5f) prompt_reset_since = all_tokens.size();
    }
    out.metrics.total_ms = ms_since(t_start);
    return out;
}

}  // namespace cactus
