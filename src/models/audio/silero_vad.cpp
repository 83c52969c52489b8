#include "models/audio/silero_vad.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"

namespace cactus {

namespace {

constexpr size_t kHidden = 128;

std::vector<float> read_tensor(const GgufFile& f, const std::string& name, const std::vector<size_t>& shape) {
    const GgufTensor* t = f.find_tensor(name);
    size_t n = 1;
    for (size_t d : shape) n *= d;
    if (!t || t->type != DType::F32 || t->n_elements != n)
        fail("load silero vad: tensor %s missing or not f32 [%zu]", name.c_str(), n);
    std::vector<float> v(n);
    std::memcpy(v.data(), t->data, n * sizeof(float));
    return v;
}

// y [n_out, t_out] = conv1d(x [n_in, t_in]) with zero padding; channel-major planes.
std::vector<float> conv(const std::vector<float>& x, size_t t_in, size_t n_in, size_t n_out, size_t kernel,
                        size_t stride, size_t pad, const std::vector<float>& w, const std::vector<float>* b,
                        size_t* t_out_ret) {
    const size_t t_out = (t_in + 2 * pad - kernel) / stride + 1;
    std::vector<float> y(n_out * t_out, 0.0f);
    for (size_t o = 0; o < n_out; ++o) {
        for (size_t t = 0; t < t_out; ++t) {
            float acc = b ? (*b)[o] : 0.0f;
            for (size_t c = 0; c < n_in; ++c) {
                const float* wk = w.data() + (o * n_in + c) * kernel;
                const float* xc = x.data() + c * t_in;
                for (size_t k = 0; k < kernel; ++k) {
                    const long pos = static_cast<long>(t * stride + k) - static_cast<long>(pad);
                    if (pos >= 0 && pos < static_cast<long>(t_in)) acc += wk[k] * xc[pos];
                }
            }
            y[o * t_out + t] = acc;
        }
    }
    *t_out_ret = t_out;
    return y;
}

void relu(std::vector<float>& x) {
    for (float& v : x) v = std::max(v, 0.0f);
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

SileroVad::SileroVad(const std::string& gguf_path) {
    auto file = GgufFile::open(gguf_path);
    const GgufFile& f = *file;
    if (f.get_string("general.architecture", "") != "silero-vad") {
        fail("load silero vad: %s is a '%s' model, not silero-vad", gguf_path.c_str(),
             f.get_string("general.architecture", "?").c_str());
    }
    auto load = [&](Conv& c, const std::string& name, size_t n_out, size_t n_in, size_t kernel, bool bias) {
        c.n_out = n_out;
        c.n_in = n_in;
        c.kernel = kernel;
        c.w = read_tensor(f, name + ".weight", {n_out, n_in, kernel});
        if (bias) c.b = read_tensor(f, name + ".bias", {n_out});
    };
    load(stft_, "stft_conv", 258, 1, 256, false);
    load(c1_, "conv1", 128, 129, 3, true);
    load(c2_, "conv2", 64, 128, 3, true);
    load(c3_, "conv3", 64, 64, 3, true);
    load(c4_, "conv4", 128, 64, 3, true);
    load(final_, "final_conv", 1, 128, 1, true);
    w_ih_ = read_tensor(f, "lstm_cell.weight_ih", {4 * kHidden, kHidden});
    w_hh_ = read_tensor(f, "lstm_cell.weight_hh", {4 * kHidden, kHidden});
    b_ih_ = read_tensor(f, "lstm_cell.bias_ih", {4 * kHidden});
    b_hh_ = read_tensor(f, "lstm_cell.bias_hh", {4 * kHidden});
}

std::vector<float> SileroVad::probabilities(const float* samples, size_t n) const {
    const size_t n_chunks = n / kChunk + 1;  // zero padding to a whole chunk, at least one sample
    std::vector<float> audio(n_chunks * kChunk, 0.0f);
    std::copy(samples, samples + n, audio.begin());
    std::vector<float> h(kHidden, 0.0f), c(kHidden, 0.0f), gates(4 * kHidden);
    std::vector<float> probs(n_chunks);
    std::vector<float> x(kContext + kChunk + kContext);  // context | chunk | reflect pad
    for (size_t i = 0; i < n_chunks; ++i) {
        const float* chunk = audio.data() + i * kChunk;
        for (size_t j = 0; j < kContext; ++j)
            x[j] = i == 0 ? 0.0f : chunk[static_cast<long>(j) - static_cast<long>(kContext)];
        std::copy(chunk, chunk + kChunk, x.begin() + kContext);
        const size_t m = kContext + kChunk;  // reflect: x[m + j] = x[m - 2 - j]
        for (size_t j = 0; j < kContext; ++j) x[m + j] = x[m - 2 - j];
        size_t t = 0;
        std::vector<float> spec = conv(x, x.size(), 1, 258, 256, 128, 0, stft_.w, nullptr, &t);  // [258, 4]
        std::vector<float> mag(129 * t);
        for (size_t k = 0; k < 129 * t; ++k)
            mag[k] = std::sqrt(spec[k] * spec[k] + spec[129 * t + k] * spec[129 * t + k]);
        size_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;
        std::vector<float> y1 = conv(mag, t, 129, 128, 3, 1, 1, c1_.w, &c1_.b, &t1);
        relu(y1);
        std::vector<float> y2 = conv(y1, t1, 128, 64, 3, 2, 1, c2_.w, &c2_.b, &t2);
        relu(y2);
        std::vector<float> y3 = conv(y2, t2, 64, 64, 3, 2, 1, c3_.w, &c3_.b, &t3);
        relu(y3);
        std::vector<float> y4 = conv(y3, t3, 64, 128, 3, 1, 1, c4_.w, &c4_.b, &t4);
        relu(y4);
        CACTUS_ASSERT(t4 == 1);
        for (size_t g = 0; g < 4 * kHidden; ++g) {  // LSTM cell: gates i, f, g, o
            float acc = b_ih_[g] + b_hh_[g];
            const float* wi = w_ih_.data() + g * kHidden;
            const float* wh = w_hh_.data() + g * kHidden;
            for (size_t k = 0; k < kHidden; ++k) acc += wi[k] * y4[k] + wh[k] * h[k];
            gates[g] = acc;
        }
        for (size_t k = 0; k < kHidden; ++k) {
            const float ig = sigmoid(gates[k]), fg = sigmoid(gates[kHidden + k]);
            const float gg = std::tanh(gates[2 * kHidden + k]), og = sigmoid(gates[3 * kHidden + k]);
            c[k] = fg * c[k] + ig * gg;
            h[k] = og * std::tanh(c[k]);
        }
        float out = final_.b[0];
        for (size_t k = 0; k < kHidden; ++k) out += final_.w[k] * std::max(h[k], 0.0f);
        probs[i] = sigmoid(out);
    }
    return probs;
}

std::vector<SpeechSpan> SileroVad::speech_spans(const float* samples, size_t n, const VadOptions& options) const {
    return speech_spans_from_probabilities(probabilities(samples, n), n, options);
}

std::vector<SpeechSpan> speech_spans_from_probabilities(const std::vector<float>& probs, size_t n_samples,
                                                        const VadOptions& o) {
    const double sr = 16000.0, window = static_cast<double>(SileroVad::kChunk);
    const double min_speech = sr * o.min_speech_ms / 1000.0;
    const double pad = sr * o.speech_pad_ms / 1000.0;
    const double max_speech = sr * o.max_speech_s - window - 2 * pad;
    const double min_silence = sr * o.min_silence_ms / 1000.0;
    const double min_silence_at_max = sr * 98.0 / 1000.0;
    const float neg = o.neg_threshold >= 0 ? o.neg_threshold : std::max(o.threshold - 0.15f, 0.01f);
    struct Span {
        double start = 0, end = 0;
    };
    std::vector<Span> speeches;
    bool triggered = false, has_current = false;
    Span cur;
    double temp_end = 0, prev_end = 0, next_start = 0;
    for (size_t i = 0; i < probs.size(); ++i) {
        const double pos = window * static_cast<double>(i);
        const float p = probs[i];
        if (p >= o.threshold && temp_end != 0) {
            temp_end = 0;
            if (next_start < prev_end) next_start = pos;
        }
        if (p >= o.threshold && !triggered) {
            triggered = true;
            has_current = true;
            cur.start = pos;
            continue;
        }
        if (triggered && pos - cur.start > max_speech) {
            if (prev_end != 0) {
                cur.end = prev_end;
                speeches.push_back(cur);
                has_current = false;
                cur = Span();
                if (next_start < prev_end) {
                    triggered = false;
                } else {
                    cur.start = next_start;
                    has_current = true;
                }
                prev_end = next_start = temp_end = 0;
            } else {
                cur.end = pos;
                speeches.push_back(cur);
                has_current = false;
                cur = Span();
                prev_end = next_start = temp_end = 0;
                triggered = false;
                continue;
            }
        }
        if (p < neg && triggered) {
            if (temp_end == 0) temp_end = pos;
            if (pos - temp_end > min_silence_at_max) prev_end = temp_end;
            if (pos - temp_end < min_silence) continue;
            cur.end = temp_end;
            if (cur.end - cur.start > min_speech) speeches.push_back(cur);
            has_current = false;
            cur = Span();
            prev_end = next_start = temp_end = 0;
            triggered = false;
        }
    }
    const double length = static_cast<double>(n_samples);
    if (has_current && length - cur.start > min_speech) {
        cur.end = length;
        speeches.push_back(cur);
    }
    for (size_t i = 0; i < speeches.size(); ++i) {
        Span& s = speeches[i];
        if (i == 0) s.start = std::floor(std::max(0.0, s.start - pad));
        if (i + 1 < speeches.size()) {
            const double silence = speeches[i + 1].start - s.end;
            if (silence < 2 * pad) {
                s.end += std::floor(silence / 2);
                speeches[i + 1].start = std::floor(std::max(0.0, speeches[i + 1].start - std::floor(silence / 2)));
            } else {
                s.end = std::floor(std::min(length, s.end + pad));
                speeches[i + 1].start = std::floor(std::max(0.0, speeches[i + 1].start - pad));
            }
        } else {
            s.end = std::floor(std::min(length, s.end + pad));
        }
    }
    std::vector<SpeechSpan> out;
    for (const Span& s : speeches) out.push_back({static_cast<size_t>(s.start), static_cast<size_t>(s.end)});
    return out;
}

}  // namespace cactus
