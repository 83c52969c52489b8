#include "engine/media/whisper_transcribe.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "models/audio/log_mel.h"
#include "ops/exp_sum.h"

namespace cactus {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTimePrecision = 0.02;  // seconds per timestamp token
constexpr size_t kInputStride = 2;       // mel frames per encoder position
constexpr double kFrameSeconds = 0.01;   // seconds per mel frame

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// log_softmax in place; returns nothing, leaves -inf where the logit was -inf. The sum of exp is
// the vectorised one of ops/exp_sum.h (2.4e-7 relative per term, summed in double per 256).
void log_softmax(std::vector<float>& x) {
    float max = kNegInf;
    for (float v : x) max = std::max(max, v);
    if (max == kNegInf) return;  // every logit -inf: nothing to normalise
    const float log_sum = max + static_cast<float>(std::log(sum_exp_below(x.data(), x.size(), max)));
    for (float& v : x) v = v == kNegInf ? kNegInf : v - log_sum;
}

// The logit rules of one decoding step; `sampled` holds the tokens generated so far in the window.
// Without timestamps (TranscribeOptions::without_timestamps) the timestamp tokens are suppressed instead.
void apply_rules(std::vector<float>& logits, const std::vector<int32_t>& sampled, const WhisperVocab& v,
                 const std::vector<int32_t>& suppress, int max_initial_index, bool timestamps) {
    const size_t n = logits.size();
    const size_t tb = static_cast<size_t>(v.timestamp_begin);
    const size_t eot = static_cast<size_t>(v.eot);
    for (int32_t id : suppress) logits[static_cast<size_t>(id)] = kNegInf;
    if (sampled.empty()) {
        for (int32_t id : v.suppress_begin) logits[static_cast<size_t>(id)] = kNegInf;
    }
    logits[static_cast<size_t>(v.no_timestamps)] = kNegInf;
    if (!timestamps) {
        std::fill(logits.begin() + static_cast<long>(std::min(tb, n)), logits.end(), kNegInf);
        return;
    }
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
        const double s = sum_exp_below(lp.data() + tb, n - tb, ts_max);
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

// The hypothesis score CTranslate2 ranks by: the sum of log-probabilities (with <|endoftext|>'s)
// over length^length_penalty (length without <|endoftext|>, at least 1).
double hypothesis_score(double sum_logprob, size_t length, float length_penalty) {
    return sum_logprob / std::pow(static_cast<double>(std::max<size_t>(1, length)), length_penalty);
}

// The k likeliest tokens of a row of log-probabilities, best first (ties: the lower id first), without
// the impossible ones (-inf).
std::vector<int32_t> top_tokens(const std::vector<float>& row, size_t k) {
    std::vector<int32_t> top;
    top.reserve(k + 1);
    for (size_t t = 0; t < row.size(); ++t) {
        const float x = row[t];
        if (x == kNegInf || (top.size() == k && !(x > row[static_cast<size_t>(top.back())]))) continue;
        size_t pos = top.size();
        while (pos > 0 && x > row[static_cast<size_t>(top[pos - 1])]) --pos;
        top.insert(top.begin() + static_cast<long>(pos), static_cast<int32_t>(t));
        if (top.size() > k) top.pop_back();
    }
    return top;
}

// One beam-search candidate: `token` after alive beam `beam`, with the cumulative log-probability.
struct Candidate {
    float score;
    size_t beam;
    int32_t token;
};

struct Beam {
    std::vector<int32_t> tokens;  // generated so far
    float score = 0.0f;           // their log-probabilities summed
    size_t slot = 0;              // the model's self-attention cache slot
};

// The beams that stay alive: next[i] is a candidate that extends beam cands[next[i]].beam. A beam's
// slot goes to its first extension (no copy); further extensions take slots no beam holds any more
// and copy the n_rows cache rows into them.
std::vector<Beam> fork_beams(WhisperModel& model, const std::vector<Beam>& alive, const std::vector<Candidate>& cands,
                             const std::vector<size_t>& next, size_t n_rows) {
    std::vector<bool> kept(alive.size(), false), first(next.size(), false), held(model.n_slots(), false);
    for (size_t i = 0; i < next.size(); ++i) {
        const size_t b = cands[next[i]].beam;
        if (!kept[b]) kept[b] = first[i] = true;
    }
    for (size_t b = 0; b < alive.size(); ++b) {
        if (kept[b]) held[alive[b].slot] = true;
    }
    std::vector<size_t> free_slots;
    for (size_t s = model.n_slots(); s-- > 0;) {
        if (!held[s]) free_slots.push_back(s);
    }
    std::vector<Beam> out(next.size());
    for (size_t i = 0; i < next.size(); ++i) {
        const Candidate& c = cands[next[i]];
        const Beam& from = alive[c.beam];
        out[i].tokens = from.tokens;
        out[i].tokens.push_back(c.token);
        out[i].score = c.score;
        if (first[i]) {
            out[i].slot = from.slot;
        } else {
            CACTUS_ASSERT(!free_slots.empty());
            out[i].slot = free_slots.back();
            free_slots.pop_back();
            model.copy_slot(out[i].slot, from.slot, n_rows);
        }
    }
    return out;
}

class WindowDecoder {
public:
    WindowDecoder(WhisperModel& model, const TranscribeOptions& o, TranscribeMetrics& m)
        : model_(model), opt_(o), metrics_(m), rng_(o.seed) {
        const WhisperVocab& v = model.vocab();
        suppress_ = v.suppress;
        for (int32_t id : {v.transcribe, v.translate, v.sot, v.sot_prev, v.sot_lm}) suppress_.push_back(id);
        max_initial_index_ = static_cast<int>(std::lround(o.max_initial_timestamp / kTimePrecision));
        model_.reserve_slots(std::max<size_t>(1, o.beam_size));
    }

    // Runs the prompt once (slot 0); the first-step logits and the no-speech probability are kept.
    void start(const std::vector<int32_t>& prompt, size_t sot_index) {
        const Clock::time_point t0 = Clock::now();
        prompt_len_ = prompt.size();
        first_logits_ = model_.decode(prompt.data(), prompt.size(), 0);
        std::vector<float> at_sot = model_.logits_of_row(sot_index);
        log_softmax(at_sot);
        no_speech_prob_ = std::exp(at_sot[static_cast<size_t>(model_.vocab().no_speech)]);
        // CTranslate2's bound (what faster-whisper gets): at most n_text_ctx / 2 new tokens, and
        // the prompt but its last token plus the new tokens within n_text_ctx
        const size_t ctx = model_.hparams().n_text_ctx;
        max_new_ = std::min(ctx / 2, ctx + 1 - std::min(ctx, prompt_len_));
        metrics_.decode_ms += ms_since(t0);
    }

    // Greedy (temperature 0) or one sample (temperature > 0).
    WindowResult run(float temperature) {
        const Clock::time_point t0 = Clock::now();
        const WhisperVocab& v = model_.vocab();
        WindowResult r;
        r.temperature = temperature;
        r.no_speech_prob = no_speech_prob_;
        std::vector<float> logits = first_logits_;
        for (size_t step = 0; step < max_new_; ++step) {
            apply_rules(logits, r.tokens, v, suppress_, max_initial_index_, !opt_.without_timestamps);
            const auto [token, lp] = pick(logits, temperature, rng_);
            r.sum_logprob += lp;
            if (token == v.eot) break;
            r.tokens.push_back(token);
            if (step + 1 >= max_new_) break;
            logits = model_.decode(&token, 1, prompt_len_ + step);
            ++metrics_.decoded_tokens;
        }
        finish(r);
        metrics_.decode_ms += ms_since(t0);
        return r;
    }

    // CTranslate2's BeamSearch at temperature 0: each step ranks beam score + log-probability over
    // every (alive beam, token) and keeps the best 2N; of the first N, <|endoftext|> (or any token
    // on the last step) finishes a hypothesis and the next unfinished candidate past N takes its
    // place. The first step expands the prompt's single sequence. Done after round(N * patience)
    // finished hypotheses (with length_penalty 0: once the best candidate finished); the
    // hypothesis with the best length-normalised score wins.
    WindowResult run_beam(size_t n_beams) {
        const Clock::time_point t0 = Clock::now();
        const WhisperVocab& v = model_.vocab();
        const size_t n_vocab = model_.hparams().n_vocab;
        const size_t n_cand = std::min(2 * n_beams, n_vocab);
        const auto max_finished = static_cast<size_t>(
            std::max(1.0, std::round(static_cast<double>(n_beams) * static_cast<double>(opt_.patience))));  // >= 1
        std::vector<Beam> alive(1);  // the prompt, in slot 0
        std::vector<float> logits = first_logits_;
        std::vector<std::pair<std::vector<int32_t>, float>> finished;
        bool best_finished = false;
        std::vector<Candidate> cands;
        for (size_t step = 0; step < max_new_; ++step) {
            const bool last = step + 1 >= max_new_;
            cands.clear();
            for (size_t b = 0; b < alive.size(); ++b) {  // a beam adds at most n_cand of the best n_cand
                std::vector<float> row(logits.begin() + static_cast<long>(b * n_vocab),
                                       logits.begin() + static_cast<long>((b + 1) * n_vocab));
                apply_rules(row, alive[b].tokens, v, suppress_, max_initial_index_, !opt_.without_timestamps);
                log_softmax(row);
                for (int32_t t : top_tokens(row, n_cand)) {
                    cands.push_back({alive[b].score + row[static_cast<size_t>(t)], b, t});
                }
            }
            // best first; ties: the lower (beam, token), as a top-k over the flattened scores
            std::sort(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) {
                if (x.score != y.score) return x.score > y.score;
                return x.beam != y.beam ? x.beam < y.beam : x.token < y.token;
            });
            if (cands.size() > n_cand) cands.resize(n_cand);
            std::vector<size_t> next;  // candidates that stay alive
            size_t secondary = n_beams;
            for (size_t k = 0; k < std::min(n_beams, cands.size()); ++k) {
                const Candidate& c = cands[k];
                if (c.token == v.eot || last) {
                    if (k == 0) best_finished = true;
                    std::vector<int32_t> hyp = alive[c.beam].tokens;
                    if (c.token != v.eot) hyp.push_back(c.token);
                    finished.emplace_back(std::move(hyp), c.score);
                    size_t j = secondary;
                    while (j < cands.size() && cands[j].token == v.eot) ++j;
                    if (j >= cands.size()) continue;  // no replacement: one beam fewer
                    secondary = j + 1;
                    next.push_back(j);
                } else {
                    next.push_back(k);
                }
            }
            const bool done =
                last || next.empty() ||
                (opt_.length_penalty == 0.0f ? best_finished && !finished.empty() : finished.size() >= max_finished);
            if (done) break;
            alive = fork_beams(model_, alive, cands, next, prompt_len_ + step);
            std::vector<int32_t> tokens;
            std::vector<size_t> slots;
            for (const Beam& b : alive) {
                tokens.push_back(b.tokens.back());
                slots.push_back(b.slot);
            }
            logits = model_.decode_slots(tokens.data(), slots.data(), alive.size(), prompt_len_ + step);
            metrics_.decoded_tokens += alive.size();
        }
        WindowResult r;
        r.temperature = 0.0f;
        r.no_speech_prob = no_speech_prob_;
        double best = 0.0;
        for (size_t i = 0; i < finished.size(); ++i) {
            const double s = hypothesis_score(finished[i].second, finished[i].first.size(), opt_.length_penalty);
            if (i == 0 || s > best) {
                best = s;
                r.tokens = finished[i].first;
                r.sum_logprob = finished[i].second;
            }
        }
        finish(r);
        metrics_.decode_ms += ms_since(t0);
        return r;
    }

    // faster-whisper's generate_with_fallback.
    WindowResult with_fallback() {
        std::vector<WindowResult> all, below_cr;
        for (float t : opt_.temperatures) {
            WindowResult best;
            if (t <= 0.0f && opt_.beam_size > 1) {
                best = run_beam(opt_.beam_size);
            } else {
                const size_t tries = t > 0.0f ? std::max<size_t>(1, opt_.best_of) : 1;
                double best_score = 0.0;
                for (size_t i = 0; i < tries; ++i) {
                    WindowResult r = run(t);
                    const double score = hypothesis_score(r.sum_logprob, r.tokens.size(), opt_.length_penalty);
                    if (i == 0 || score > best_score) {
                        best = r;
                        best_score = score;
                    }
                }
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
    // faster-whisper's average log-probability (over the tokens and <|endoftext|>) and the
    // compression ratio of the text.
    void finish(WindowResult& r) const {
        r.avg_logprob = static_cast<float>(r.sum_logprob / static_cast<double>(r.tokens.size() + 1));
        r.compression = compression_ratio(model_.vocab().decode(r.tokens));
    }

    WhisperModel& model_;
    const TranscribeOptions& opt_;
    TranscribeMetrics& metrics_;
    std::mt19937_64 rng_;
    std::vector<int32_t> suppress_;
    int max_initial_index_ = 50;
    size_t prompt_len_ = 0;
    size_t max_new_ = 0;
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

void check_options(const TranscribeOptions& o) {
    if (o.beam_size == 0 || o.beam_size > kMaxBeamSize)
        fail("transcribe: beam_size %zu is out of range (1 to %zu)", o.beam_size, kMaxBeamSize);
    if (!(o.patience > 0.0f) || !std::isfinite(o.patience))
        fail("transcribe: patience %g must be a finite number above 0", static_cast<double>(o.patience));
    if (o.beam_size > 1 && std::round(static_cast<double>(o.beam_size) * o.patience) < 1.0) {
        fail("transcribe: patience %g with %zu beams waits for no hypothesis (round(beam_size * patience) < 1)",
             static_cast<double>(o.patience), o.beam_size);
    }
    if (!(o.length_penalty >= 0.0f) || !std::isfinite(o.length_penalty))
        fail("transcribe: length_penalty %g must be a finite number >= 0", static_cast<double>(o.length_penalty));
}

}  // namespace

std::vector<int32_t> decode_window(WhisperModel& model, const std::vector<int32_t>& prompt,
                                   const TranscribeOptions& options, bool beam) {
    check_options(options);
    const auto sot = std::find(prompt.begin(), prompt.end(), model.vocab().sot);
    if (sot == prompt.end()) fail("decode_window: the prompt has no <|startoftranscript|>");
    TranscribeMetrics metrics;
    WindowDecoder decoder(model, options, metrics);
    decoder.start(prompt, static_cast<size_t>(sot - prompt.begin()));
    return (beam ? decoder.run_beam(options.beam_size) : decoder.run(0.0f)).tokens;
}

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
    check_options(options);

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
        if (options.without_timestamps) prompt.push_back(v.no_timestamps);
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
