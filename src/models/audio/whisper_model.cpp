#include "models/audio/whisper_model.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/weights.h"

namespace cactus {

struct WhisperModel::EncLayer {
    Tensor attn_norm_w, attn_norm_b;  // [n_embd]
    Tensor wq, wk, wv, wo;            // [n_embd, n_embd] (q, k, v: rows of the fused QKV)
    Tensor bq, bk, bv, bo;            // [n_embd]
    Tensor ffn_norm_w, ffn_norm_b;    // [n_embd]
    Tensor up, up_b, down, down_b;    // [4 n_embd, n_embd], [4 n_embd], [n_embd, 4 n_embd], [n_embd]
};

struct WhisperModel::DecLayer : WhisperModel::EncLayer {
    Tensor cross_norm_w, cross_norm_b;  // [n_embd]
    Tensor cq, cq_b;                    // [n_embd, n_embd], [n_embd]
    Tensor ck, ck_b, cv, cv_b;          // rows of the fused cross K/V [2 n_embd, n_embd]
    Tensor co, co_b;                    // [n_embd, n_embd], [n_embd]
};

namespace {

constexpr float kNormEps = 1e-5f;

// Elements [first, first + n) of an F32 or I32 vector tensor, as a [1, n] tensor (a bias, an id list).
Tensor slice(const Tensor& v, size_t first, size_t n) {
    CACTUS_ASSERT((v.type == DType::F32 || v.type == DType::I32) && first + n <= v.elements());
    return make_tensor(v.buffer, v.offset + dtype_row_bytes(v.type, first), v.type, n, 1);
}

std::vector<int32_t> int_array(const GgufFile& f, const std::string& key, bool required) {
    std::vector<int32_t> out;
    if (!f.has(key)) {
        if (required) fail("load whisper: metadata %s is missing", key.c_str());
        return out;
    }
    for (int64_t v : f.get_array(key).ints) out.push_back(static_cast<int32_t>(v));
    return out;
}

// GPT-2 byte-level BPE: each byte is drawn as one code point; this maps it back.
int byte_of_codepoint(uint32_t cp) {
    static int table[324];
    static bool ready = false;
    if (!ready) {
        for (int& t : table) t = -1;
        uint32_t extra = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            table[printable ? b : extra++] = b;
        }
        ready = true;
    }
    return cp < 324 ? table[cp] : -1;
}

}  // namespace

std::string WhisperVocab::token_bytes(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens.size() || id >= eot) return "";
    const std::string& s = tokens[static_cast<size_t>(id)];
    std::string out;
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        uint32_t cp = c;
        size_t len = 1;
        if (c >= 0xC0 && c < 0xE0 && i + 1 < s.size()) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
            len = 2;
        }
        const int b = byte_of_codepoint(cp);
        if (b >= 0) out.push_back(static_cast<char>(b));
        i += len;
    }
    return out;
}

std::string WhisperVocab::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    for (int32_t id : ids) out += token_bytes(id);
    return out;
}

int32_t WhisperVocab::language_token(const std::string& code) const {
    for (size_t i = 0; i < lang_codes.size(); ++i) {
        if (lang_codes[i] == code) return lang_ids[i];
    }
    return -1;
}

WhisperModel::WhisperModel(const std::string& path, Backend& backend) : be_(backend), blocks_(backend) {
    file_ = GgufFile::open(path);
    const GgufFile& f = *file_;
    if (f.get_string("general.architecture", "") != "whisper") {
        fail("load whisper: %s is a '%s' model, not whisper", path.c_str(),
             f.get_string("general.architecture", "?").c_str());
    }
    hp_.n_mels = f.get_uint("whisper.n_mels");
    hp_.n_embd = f.get_uint("whisper.n_embd");
    hp_.n_head = f.get_uint("whisper.n_head");
    hp_.n_audio_ctx = f.get_uint("whisper.n_audio_ctx");
    hp_.n_text_ctx = f.get_uint("whisper.n_text_ctx");
    hp_.n_enc_layer = f.get_uint("whisper.encoder.n_layer");
    hp_.n_dec_layer = f.get_uint("whisper.decoder.n_layer");
    hp_.n_vocab = f.get_uint("whisper.n_vocab");
    if (hp_.n_head == 0 || hp_.n_embd % hp_.n_head != 0 || hp_.n_embd > 8192 || hp_.n_audio_ctx > 4096 ||
        hp_.n_text_ctx > 4096 || hp_.n_enc_layer > 128 || hp_.n_dec_layer > 128 || hp_.n_mels > 512) {
        fail("load whisper: implausible hyper-parameters (n_embd %zu, n_head %zu, ctx %zu/%zu, layers %zu/%zu)",
             hp_.n_embd, hp_.n_head, hp_.n_audio_ctx, hp_.n_text_ctx, hp_.n_enc_layer, hp_.n_dec_layer);
    }
    vocab_.tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (vocab_.tokens.size() != hp_.n_vocab) {
        fail("load whisper: %zu tokens for a vocabulary of %zu", vocab_.tokens.size(), hp_.n_vocab);
    }
    auto tok = [&](const char* key) {
        const uint64_t id = f.get_uint(std::string("whisper.token.") + key);
        if (id >= hp_.n_vocab)
            fail("load whisper: token %s = %llu is outside the vocabulary", key, (unsigned long long)id);
        return static_cast<int32_t>(id);
    };
    vocab_.eot = tok("eot");
    vocab_.sot = tok("sot");
    vocab_.transcribe = tok("transcribe");
    vocab_.translate = tok("translate");
    vocab_.sot_prev = tok("sot_prev");
    vocab_.sot_lm = tok("sot_lm");
    vocab_.no_timestamps = tok("no_timestamps");
    vocab_.no_speech = tok("no_speech");
    vocab_.timestamp_begin = tok("timestamp_begin");
    vocab_.multilingual = f.get_bool("whisper.multilingual", false);
    vocab_.suppress = int_array(f, "whisper.suppress_ids", true);
    vocab_.suppress_begin = int_array(f, "whisper.suppress_ids_begin", true);
    vocab_.lang_ids = int_array(f, "whisper.lang_ids", false);
    if (f.has("whisper.lang_codes")) vocab_.lang_codes = f.get_string_array("whisper.lang_codes");
    if (vocab_.lang_codes.size() != vocab_.lang_ids.size())
        fail("load whisper: language codes and ids differ in count");
    for (int32_t id : vocab_.suppress) {
        if (id < 0 || static_cast<size_t>(id) >= hp_.n_vocab)
            fail("load whisper: suppressed token %d is outside the vocabulary", id);
    }
    for (int32_t id : vocab_.suppress_begin) {
        if (id < 0 || static_cast<size_t>(id) >= hp_.n_vocab)
            fail("load whisper: suppressed token %d is outside the vocabulary", id);
    }
    weights_ = std::make_unique<WeightLoader>(f, be_);
    load(*weights_, f);
    alloc_activations();
}

WhisperModel::~WhisperModel() = default;

void WhisperModel::load(WeightLoader& w, const GgufFile& f) {
    const size_t d = hp_.n_embd;
    const GgufTensor* filters = f.find_tensor("mel_filters");
    if (!filters || filters->type != DType::F32 || filters->n_elements != hp_.n_mels * 201) {
        fail("load whisper: mel_filters must be f32 [%zu, 201]", hp_.n_mels);
    }
    mel_filters_.resize(filters->n_elements);
    std::memcpy(mel_filters_.data(), filters->data, filters->n_bytes);

    conv1_w_ = w.matrix("enc.conv1.weight", hp_.n_mels * 3, d);
    conv1_b_ = w.vector("enc.conv1.bias", d);
    conv2_w_ = w.matrix("enc.conv2.weight", d * 3, d);
    conv2_b_ = w.vector("enc.conv2.bias", d);
    enc_pos_ = w.vector("enc.pos", hp_.n_audio_ctx * d).reshaped(d, hp_.n_audio_ctx);
    dec_pos_ = w.vector("dec.pos", hp_.n_text_ctx * d).reshaped(d, hp_.n_text_ctx);
    enc_norm_w_ = w.vector("enc.norm.weight", d);
    enc_norm_b_ = w.vector("enc.norm.bias", d);
    dec_norm_w_ = w.vector("dec.norm.weight", d);
    dec_norm_b_ = w.vector("dec.norm.bias", d);
    token_embd_ = w.table("dec.token_embd", d, hp_.n_vocab);  // get_rows and the output product

    auto load_common = [&](EncLayer& l, const std::string& p) {
        l.attn_norm_w = w.vector(p + "attn_norm.weight", d);
        l.attn_norm_b = w.vector(p + "attn_norm.bias", d);
        const Tensor qkv = w.matrix(p + "attn_qkv.weight", d, 3 * d);  // [3 d, d]
        const Tensor qkv_b = w.vector(p + "attn_qkv.bias", 3 * d);
        l.wq = qkv.rows_view(0, d);
        l.wk = qkv.rows_view(d, d);
        l.wv = qkv.rows_view(2 * d, d);
        l.bq = slice(qkv_b, 0, d);
        l.bk = slice(qkv_b, d, d);
        l.bv = slice(qkv_b, 2 * d, d);
        l.wo = w.matrix(p + "attn_out.weight", d, d);
        l.bo = w.vector(p + "attn_out.bias", d);
        l.ffn_norm_w = w.vector(p + "ffn_norm.weight", d);
        l.ffn_norm_b = w.vector(p + "ffn_norm.bias", d);
        l.up = w.matrix(p + "ffn_up.weight", d, 4 * d);
        l.up_b = w.vector(p + "ffn_up.bias", 4 * d);
        l.down = w.matrix(p + "ffn_down.weight", 4 * d, d);
        l.down_b = w.vector(p + "ffn_down.bias", d);
    };
    enc_.resize(hp_.n_enc_layer);
    for (size_t il = 0; il < hp_.n_enc_layer; ++il) load_common(enc_[il], "enc.blk." + std::to_string(il) + ".");
    dec_.resize(hp_.n_dec_layer);
    for (size_t il = 0; il < hp_.n_dec_layer; ++il) {
        DecLayer& l = dec_[il];
        const std::string p = "dec.blk." + std::to_string(il) + ".";
        load_common(l, p);
        l.cross_norm_w = w.vector(p + "cross_norm.weight", d);
        l.cross_norm_b = w.vector(p + "cross_norm.bias", d);
        l.cq = w.matrix(p + "cross_q.weight", d, d);
        l.cq_b = w.vector(p + "cross_q.bias", d);
        const Tensor kv = w.matrix(p + "cross_kv.weight", d, 2 * d);  // [2 d, d]
        const Tensor kv_b = w.vector(p + "cross_kv.bias", 2 * d);
        l.ck = kv.rows_view(0, d);
        l.cv = kv.rows_view(d, d);
        l.ck_b = slice(kv_b, 0, d);
        l.cv_b = slice(kv_b, d, d);
        l.co = w.matrix(p + "cross_out.weight", d, d);
        l.co_b = w.vector(p + "cross_out.bias", d);
    }
}

Tensor WhisperModel::alloc(size_t width, size_t rows, DType type) {
    buffers_.push_back(be_.alloc(dtype_row_bytes(type, width) * rows));
    return make_tensor(buffers_.back().get(), 0, type, width, rows);
}

void WhisperModel::alloc_activations() {
    const size_t d = hp_.n_embd, na = hp_.n_audio_ctx, nt = hp_.n_text_ctx;
    mel_ = alloc(hp_.n_mels, hp_.n_frames());
    conv_ = alloc(d, hp_.n_frames());
    ex_ = alloc(d, na);
    eh_ = alloc(d, na);
    eq_ = alloc(d, na);
    ek_ = alloc(d, na);
    ev_ = alloc(d, na);
    ea_ = alloc(d, na);
    ef_ = alloc(4 * d, na);
    dx_ = alloc(d, nt);
    dh_ = alloc(d, nt);
    dq_ = alloc(d, nt);
    da_ = alloc(d, nt);
    dk_ = alloc(d, nt);
    dv_ = alloc(d, nt);
    df_ = alloc(4 * d, nt);
    ids_ = alloc(nt, 1, DType::I32);
    pos_ids_ = alloc(nt, 1, DType::I32);
    kv_rows_ = alloc(nt, 1, DType::I32);
    full_window_ = be_.replays_steps();
    if (full_window_) mask_ = alloc(nt, nt);
    for (size_t il = 0; il < hp_.n_dec_layer; ++il) {
        cross_k_.push_back(alloc(d, na));
        cross_v_.push_back(alloc(d, na));
    }
    alloc_caches(1);
}

void WhisperModel::alloc_caches(size_t n_slots) {
    const size_t d = hp_.n_embd, nt = hp_.n_text_ctx;
    cache_buffers_.clear();
    self_k_.clear();
    self_v_.clear();
    const std::vector<float> zeros(full_window_ ? d * nt : 0, 0.0f);
    auto cache = [&](size_t width, size_t rows) {
        cache_buffers_.push_back(be_.alloc(dtype_row_bytes(DType::F32, width) * rows));
        const Tensor t = make_tensor(cache_buffers_.back().get(), 0, DType::F32, width, rows);
        // A whole window is read under the mask: its unwritten rows must be numbers (0 weight x NaN
        // is NaN), so they start as zeros.
        for (size_t r = 0; full_window_ && width == d && r < rows; r += nt) {
            be_.upload(t.rows_view(r, nt), zeros.data(), zeros.size() * sizeof(float));
        }
        return t;
    };
    logits_ = cache(hp_.n_vocab, n_slots);
    for (size_t il = 0; il < hp_.n_dec_layer; ++il) {
        self_k_.push_back(cache(d, n_slots * nt));
        self_v_.push_back(cache(d, n_slots * nt));
    }
    n_slots_ = n_slots;
}

void WhisperModel::reserve_slots(size_t n) {
    if (n == 0 || n > kMaxSlots) fail("whisper: %zu decoder sequences requested (1 to %zu)", n, kMaxSlots);
    if (n > n_slots_) alloc_caches(n);
}

Tensor WhisperModel::slot_rows(const Tensor& cache, size_t slot) const {
    CACTUS_ASSERT(slot < n_slots_);
    return cache.rows_view(slot * hp_.n_text_ctx, hp_.n_text_ctx);
}

void WhisperModel::copy_slot(size_t dst, size_t src, size_t n_rows) {
    if (dst >= n_slots_ || src >= n_slots_ || n_rows > hp_.n_text_ctx) {
        fail("whisper copy_slot: slot %zu <- %zu, %zu rows (%zu slots of %zu rows)", dst, src, n_rows, n_slots_,
             hp_.n_text_ctx);
    }
    if (dst == src || n_rows == 0) return;
    for (size_t il = 0; il < hp_.n_dec_layer; ++il) {  // x * 1 is an exact copy
        be_.scale(slot_rows(self_k_[il], dst).rows_view(0, n_rows), slot_rows(self_k_[il], src).rows_view(0, n_rows),
                  1.0f);
        be_.scale(slot_rows(self_v_[il], dst).rows_view(0, n_rows), slot_rows(self_v_[il], src).rows_view(0, n_rows),
                  1.0f);
    }
}

DenseAttention WhisperModel::attention_shape() const {
    DenseAttention shape;  // not causal
    shape.n_head = shape.n_head_kv = hp_.n_head;
    shape.head_dim = shape.head_dim_v = hp_.n_embd / hp_.n_head;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
    return shape;
}

void WhisperModel::encoder_block(const EncLayer& l, const Tensor& x, size_t n) {
    const Tensor h = eh_.rows_view(0, n), q = eq_.rows_view(0, n), k = ek_.rows_view(0, n);
    const Tensor v = ev_.rows_view(0, n), a = ea_.rows_view(0, n), f = ef_.rows_view(0, n);
    blocks_.layer_norm(h, x, l.attn_norm_w, l.attn_norm_b, kNormEps);
    blocks_.encoder_linear(q, l.wq, h, l.bq);
    blocks_.encoder_linear(k, l.wk, h, l.bk);
    blocks_.encoder_linear(v, l.wv, h, l.bv);
    be_.attention_dense(a, q, k, v, Tensor(), attention_shape());  // [n, d]
    blocks_.encoder_linear(h, l.wo, a, l.bo);
    blocks_.residual(x, h);
    blocks_.layer_norm(h, x, l.ffn_norm_w, l.ffn_norm_b, kNormEps);
    blocks_.encoder_linear(f, l.up, h, l.up_b);  // [n, 4 d]
    be_.gelu(f, f, Activation::GELU_ERF);
    blocks_.encoder_linear(h, l.down, f, l.down_b);
    blocks_.residual(x, h);
}

void WhisperModel::encoder_states(size_t rows, std::vector<float>* out) {
    if (rows == 0 || rows > hp_.n_audio_ctx)
        fail("whisper: %zu encoder rows asked, 1..%zu exist", rows, hp_.n_audio_ctx);
    out->resize(rows * hp_.n_embd);
    be_.download(out->data(), ex_.rows_view(0, rows), out->size() * sizeof(float));
}

void WhisperModel::encode(const float* mel) {
    const size_t d = hp_.n_embd, na = hp_.n_audio_ctx;
    be_.upload(mel_, mel, mel_.bytes());
    Conv1d c1;
    c1.kernel = 3;
    c1.pad = 1;
    be_.conv1d(conv_, mel_, conv1_w_, conv1_b_, c1);  // [n_frames, d]
    be_.gelu(conv_, conv_, Activation::GELU_ERF);
    Conv1d c2 = c1;
    c2.stride = 2;
    be_.conv1d(ex_, conv_, conv2_w_, conv2_b_, c2);  // [n_audio_ctx, d]
    be_.gelu(ex_, ex_, Activation::GELU_ERF);
    be_.add(ex_, ex_, enc_pos_);
    for (const EncLayer& l : enc_) encoder_block(l, ex_, na);
    blocks_.layer_norm(ex_, ex_, enc_norm_w_, enc_norm_b_, kNormEps);
    for (size_t il = 0; il < hp_.n_dec_layer; ++il) {  // cross-attention K/V, once per window
        blocks_.encoder_linear(cross_k_[il], dec_[il].ck, ex_, dec_[il].ck_b);
        blocks_.encoder_linear(cross_v_[il], dec_[il].cv, ex_, dec_[il].cv_b);
    }
    (void)d;
}

void WhisperModel::decoder_block(const DecLayer& l, size_t il, const Tensor& x, size_t n, size_t n_past,
                                 const size_t* slots) {
    const Tensor h = dh_.rows_view(0, n), q = dq_.rows_view(0, n), a = da_.rows_view(0, n);
    const Tensor f = df_.rows_view(0, n);
    blocks_.layer_norm(h, x, l.attn_norm_w, l.attn_norm_b, kNormEps);
    // self-attention: the step's K/V rows go to the cache rows kv_rows_ names (stage_step)
    const Tensor k = dk_.rows_view(0, n), v = dv_.rows_view(0, n);
    blocks_.linears(h, {{q, l.wq, l.bq}, {k, l.wk, l.bk}, {v, l.wv, l.bv}});
    const Tensor rows = slice(kv_rows_, 0, n);
    be_.set_rows(self_k_[il], k, rows);
    be_.set_rows(self_v_[il], v, rows);
    if (slots == nullptr) {
        self_attention(a, q, il, 0, n_past, 0);
    } else {
        for (size_t i = 0; i < n; ++i) self_attention(a.rows_view(i, 1), q.rows_view(i, 1), il, slots[i], n_past, i);
    }
    blocks_.linear(h, l.wo, a, l.bo);
    blocks_.residual(x, h);
    // cross-attention over the window's encoder states
    blocks_.layer_norm(h, x, l.cross_norm_w, l.cross_norm_b, kNormEps);
    blocks_.linear(q, l.cq, h, l.cq_b);
    be_.attention_dense(a, q, cross_k_[il], cross_v_[il], Tensor(), attention_shape());
    blocks_.linear(h, l.co, a, l.co_b);
    blocks_.residual(x, h);
    // MLP
    blocks_.layer_norm(h, x, l.ffn_norm_w, l.ffn_norm_b, kNormEps);
    blocks_.linear(f, l.up, h, l.up_b);
    be_.gelu(f, f, Activation::GELU_ERF);
    blocks_.linear(h, l.down, f, l.down_b);
    blocks_.residual(x, h);
}

void WhisperModel::self_attention(const Tensor& a, const Tensor& q, size_t il, size_t slot, size_t n_past,
                                  size_t first) {
    DenseAttention shape = attention_shape();
    const Tensor ks = slot_rows(self_k_[il], slot), vs = slot_rows(self_v_[il], slot);
    if (full_window_) {  // the queries' mask rows hide the rows past their positions
        be_.attention_dense(a, q, ks, vs, mask_.rows_view(first, q.rows()), shape);
        return;
    }
    shape.causal = true;  // the queries are the last of the rows read
    const size_t seen = n_past + q.rows();
    be_.attention_dense(a, q, ks.rows_view(0, seen), vs.rows_view(0, seen), Tensor(), shape);
}

void WhisperModel::stage_step(size_t n, size_t n_past, const size_t* slots) {
    const size_t nt = hp_.n_text_ctx;
    std::vector<int32_t> pos(n), rows(n);
    for (size_t i = 0; i < n; ++i) {
        // one sequence: positions n_past .. n_past + n - 1; one token per sequence: all at n_past
        pos[i] = static_cast<int32_t>(slots == nullptr ? n_past + i : n_past);
        rows[i] = static_cast<int32_t>((slots == nullptr ? 0 : slots[i]) * nt + static_cast<size_t>(pos[i]));
    }
    be_.upload(pos_ids_, pos.data(), n * sizeof(int32_t));
    be_.upload(kv_rows_, rows.data(), n * sizeof(int32_t));
    if (!full_window_) return;
    std::vector<float> mask(n * nt);
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < nt; ++j) mask[i * nt + j] = j <= static_cast<size_t>(pos[i]) ? 0.0f : -INFINITY;
    }
    be_.upload(mask_, mask.data(), mask.size() * sizeof(float));
}

void WhisperModel::run_decoder(const int32_t* tokens, size_t n, size_t n_past, const size_t* slots) {
    for (size_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= hp_.n_vocab) {
            fail("whisper decode: token %d is outside the vocabulary of %zu", tokens[i], hp_.n_vocab);
        }
    }
    const Tensor ids = slice(ids_, 0, n);
    be_.upload(ids, tokens, n * sizeof(int32_t));
    stage_step(n, n_past, slots);
    const Tensor x = dx_.rows_view(0, n);  // [n, d]
    be_.get_rows(x, token_embd_, ids, 1.0f);
    const Tensor pos = dh_.rows_view(0, n);
    be_.get_rows(pos, dec_pos_, slice(pos_ids_, 0, n), 1.0f);
    be_.add(x, x, pos);
    for (size_t il = 0; il < hp_.n_dec_layer; ++il) decoder_block(dec_[il], il, x, n, n_past, slots);
    blocks_.layer_norm(dh_.rows_view(0, n), x, dec_norm_w_, dec_norm_b_, kNormEps);
    last_n_ = n;
}

const std::vector<float>& WhisperModel::decode(const int32_t* tokens, size_t n, size_t n_past) {
    if (n == 0 || n_past + n > hp_.n_text_ctx) {
        fail("whisper decode: %zu tokens after %zu do not fit the %zu decoder positions", n, n_past, hp_.n_text_ctx);
    }
    run_decoder(tokens, n, n_past, nullptr);
    const Tensor logits = logits_.rows_view(0, 1);
    be_.matmul(logits, token_embd_, dh_.rows_view(n - 1, 1));  // [1, n_vocab]
    host_logits_.resize(hp_.n_vocab);
    be_.download(host_logits_.data(), logits, logits.bytes());
    return host_logits_;
}

const std::vector<float>& WhisperModel::decode_slots(const int32_t* tokens, const size_t* slots, size_t n,
                                                     size_t n_past) {
    if (n == 0 || n > n_slots_ || n_past + 1 > hp_.n_text_ctx) {
        fail("whisper decode_slots: %zu sequences (of %zu slots) at position %zu (of %zu)", n, n_slots_, n_past,
             hp_.n_text_ctx);
    }
    for (size_t i = 0; i < n; ++i) {
        if (slots[i] >= n_slots_) fail("whisper decode_slots: slot %zu of %zu", slots[i], n_slots_);
        for (size_t j = 0; j < i; ++j) {
            if (slots[i] == slots[j]) fail("whisper decode_slots: slot %zu given twice", slots[i]);
        }
    }
    run_decoder(tokens, n, n_past, slots);
    const Tensor logits = logits_.rows_view(0, n);
    be_.matmul(logits, token_embd_, dh_.rows_view(0, n));  // [n, n_vocab]
    host_logits_.resize(n * hp_.n_vocab);
    be_.download(host_logits_.data(), logits, logits.bytes());
    return host_logits_;
}

std::vector<float> WhisperModel::logits_of_row(size_t row) {
    CACTUS_ASSERT(row < last_n_);
    const Tensor logits = logits_.rows_view(0, 1);
    be_.matmul(logits, token_embd_, dh_.rows_view(row, 1));
    std::vector<float> out(hp_.n_vocab);
    be_.download(out.data(), logits, logits.bytes());
    return out;
}

}  // namespace cactus
