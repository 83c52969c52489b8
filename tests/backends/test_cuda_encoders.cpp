// The encoders on the GPU against the same encoders on the CPU: random-weight mmproj files of the
// idefics3 (SmolVLM) and lfm2 (LFM2-VL) towers and a random-weight tiny Whisper, written here with
// GgufWriter (tests/models/vision/make_vlm_gguf.py writes the same mmproj layout in Python). Without
// a GPU (CI) those tests report themselves skipped with the reason. EncoderDevice.* run everywhere:
// the device asked for reaches the encoders (an unknown one is an error naming it, never the CPU).
//
// Tolerance. The CPU rounds a product's activations to its weights' vec_dot_type and the GPU rounds
// them the same way (F16/BF16/F32 weights: f32 activations, on the tiled tf32 hi+lo path with
// CACTUS_CUDA_MMQ=1 or the warp-per-row f32 kernel otherwise; Q8_0: the same q8 blocks), so the two
// differ by float summation order and the libm of each side (erf, tanh, exp in GELU, softmax):
// ~1e-6 relative per op. Through a few layers of random weights that stays near 1e-5; the bound is
// 1e-3 of the output's L2 norm for float weights (a wrong op, layout or missing bias gives O(1)).
// For Q8_0 weights the GPU's prompt products may run through cuBLAS on f16 (cuda_gemm.h), which
// does not round x to q8 as the CPU does: both are then compared with the exact tower (the same
// weights written as F32 holding the Q8_0 values, on the CPU), and the GPU must be no further from
// it than 1.25x the CPU's own distance (1.1e-2 here, all of it the CPU's q8 rounding of x), or
// 1e-3. With the int8 tiles the two share the q8 rounding, and the bound holds the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unistd.h>

#include "backend_test_util.h"
#include "cactus/cactus.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "models/audio/whisper_model.h"
#include "models/vision/vision_encoder.h"
#include "ops/quant.h"

namespace cactus {
namespace {

// Writes random tensors: matrices uniform in [-a, a] with a = 1.7/sqrt(fan_in), vectors near 0
// (biases) or near 1 (norm weights).
class RandomTensors {
public:
    // as_f32: matrices are written as F32 holding their type's dequantized values (the same draws).
    RandomTensors(GgufWriter& w, uint32_t seed, bool as_f32 = false) : w_(w), rng_(seed), as_f32_(as_f32) {}
    // GGUF dims {n_in, n_out}: W [n_out, n_in] of `type`.
    void matrix(const std::string& name, DType type, size_t n_in, size_t n_out) {
        std::vector<float> v = uniform(n_in * n_out, 1.7f / std::sqrt(float(n_in)));
        const size_t rb = dtype_row_bytes(type, n_in);
        std::vector<uint8_t> bytes(rb * n_out);
        for (size_t r = 0; r < n_out; ++r) quantize_row_ref(type, bytes.data() + r * rb, v.data() + r * n_in, n_in);
        if (!as_f32_) {
            w_.add_tensor(name, type, {n_in, n_out}, bytes.data(), bytes.size());
            return;
        }
        for (size_t r = 0; r < n_out; ++r) dequantize_row_ref(type, v.data() + r * n_in, bytes.data() + r * rb, n_in);
        w_.add_tensor(name, DType::F32, {n_in, n_out}, v.data(), v.size() * sizeof(float));
    }
    void f32(const std::string& name, const std::vector<uint64_t>& dims, float a, float center = 0.0f) {
        size_t n = 1;
        for (uint64_t d : dims) n *= d;
        std::vector<float> v = uniform(n, a);
        for (float& x : v) x += center;
        w_.add_tensor(name, DType::F32, dims, v.data(), n * sizeof(float));
    }
    void bias(const std::string& name, size_t n) { f32(name, {n}, 0.05f); }
    void norm(const std::string& name, size_t n) { f32(name, {n}, 0.2f, 1.0f); }

private:
    std::vector<float> uniform(size_t n, float a) {
        std::uniform_real_distribution<float> dist(-a, a);
        std::vector<float> v(n);
        for (float& x : v) x = dist(rng_);
        return v;
    }
    GgufWriter& w_;
    std::mt19937 rng_;
    bool as_f32_;
};

struct VisionShape {
    std::string projector;  // idefics3 or lfm2
    DType type;             // the matrices' type
    size_t image_size = 64, patch = 8, n_embd = 96, n_ff = 200, n_layer = 2, n_head = 3, proj_dim = 80, scale = 2;
    size_t hidden = 136;  // lfm2's projector MLP
};

// An mmproj as llama.cpp's converter writes it (keys clip.*, tensors v.* and mm.*).
// as_f32: the matrices as F32 holding s.type's dequantized values (RandomTensors).
std::vector<uint8_t> random_mmproj(const VisionShape& s, uint32_t seed, bool as_f32 = false) {
    GgufWriter w;
    w.add_string("general.architecture", "clip");
    w.add_bool("clip.has_vision_encoder", true);
    w.add_string("clip.projector_type", s.projector);
    w.add_u32("clip.vision.image_size", uint32_t(s.image_size));
    w.add_u32("clip.vision.patch_size", uint32_t(s.patch));
    w.add_u32("clip.vision.embedding_length", uint32_t(s.n_embd));
    w.add_u32("clip.vision.feed_forward_length", uint32_t(s.n_ff));
    w.add_u32("clip.vision.block_count", uint32_t(s.n_layer));
    w.add_u32("clip.vision.attention.head_count", uint32_t(s.n_head));
    w.add_u32("clip.vision.projection_dim", uint32_t(s.proj_dim));
    w.add_f32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
    w.add_float_array("clip.vision.image_mean", GgufType::F32, {0.5, 0.5, 0.5});
    w.add_float_array("clip.vision.image_std", GgufType::F32, {0.5, 0.5, 0.5});
    w.add_u32("clip.vision.projector.scale_factor", uint32_t(s.scale));
    if (s.projector == "idefics3") w.add_u32("clip.vision.preproc_image_size", uint32_t(2 * s.image_size));
    w.add_bool("clip.use_gelu", true);
    RandomTensors t(w, seed, as_f32);
    const size_t d = s.n_embd, p = s.patch, side = s.image_size / s.patch;
    t.f32("v.patch_embd.weight", {p, p, 3, d}, 1.7f / std::sqrt(float(3 * p * p)));
    t.bias("v.patch_embd.bias", d);
    t.f32("v.position_embd.weight", {d, side * side}, 0.5f);
    for (size_t il = 0; il < s.n_layer; ++il) {
        const std::string b = "v.blk." + std::to_string(il) + ".";
        for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
            t.matrix(b + n + ".weight", s.type, d, d);
            t.bias(b + n + ".bias", d);
        }
        for (const char* n : {"ln1", "ln2"}) {
            t.norm(b + n + ".weight", d);
            t.bias(b + n + ".bias", d);
        }
        t.matrix(b + "ffn_up.weight", s.type, d, s.n_ff);
        t.bias(b + "ffn_up.bias", s.n_ff);
        t.matrix(b + "ffn_down.weight", s.type, s.n_ff, d);
        t.bias(b + "ffn_down.bias", d);
    }
    t.norm("v.post_ln.weight", d);
    t.bias("v.post_ln.bias", d);
    const size_t merged = d * s.scale * s.scale;
    if (s.projector == "lfm2") {
        t.norm("mm.input_norm.weight", merged);
        t.bias("mm.input_norm.bias", merged);
        t.matrix("mm.1.weight", s.type, merged, s.hidden);
        t.bias("mm.1.bias", s.hidden);
        t.matrix("mm.2.weight", s.type, s.hidden, s.proj_dim);
        t.bias("mm.2.bias", s.proj_dim);
    } else {
        t.matrix("mm.model.fc.weight", s.type, merged, s.proj_dim);
    }
    return w.to_bytes();
}

EncoderInput random_image(size_t width, size_t height, uint32_t seed) {
    EncoderInput in;
    in.width = width;
    in.height = height;
    in.planes = testing::random_floats(3 * width * height, seed);
    return in;
}

// ||a - b|| / ||b||.
double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Relative L2 bound GPU vs CPU for float weights (see the top).
constexpr double kFloatBound = 1e-3;

// The tower's output [tokens, proj_dim] for `in` on `device`, from an mmproj of `bytes`.
std::vector<float> encode_on(const std::vector<uint8_t>& bytes, const std::string& device, const EncoderInput& in,
                             size_t proj_dim) {
    std::unique_ptr<GgufFile> file = GgufFile::from_memory(bytes.data(), bytes.size());
    BackendOptions options;
    options.device = device;
    VisionEncoder encoder(*file, options);
    EXPECT_EQ(std::string(encoder.device()).rfind(device, 0), 0u) << encoder.device();
    std::vector<float> out;
    encoder.encode(in, &out);
    EXPECT_EQ(out.size(), encoder.tokens(in) * proj_dim) << device;
    return out;
}

// The same image through the tower on the CPU and on the GPU (quantized weights: see the top).
void expect_vision_matches_cpu(const VisionShape& s, const EncoderInput& in) {
    std::string why;
    if (!testing::try_cuda(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
    const std::vector<uint8_t> bytes = random_mmproj(s, 5);
    const std::vector<float> want = encode_on(bytes, "cpu", in, s.proj_dim);
    const std::vector<float> got = encode_on(bytes, "cuda", in, s.proj_dim);
    ASSERT_EQ(got.size(), want.size());
    const double err = relative_l2(got, want);
    if (dtype_traits(s.type).block_size == 1) {
        std::printf("%s %s %zux%zu: relative L2 GPU vs CPU %.3g (bound %.0e)\n", s.projector.c_str(),
                    dtype_name(s.type), in.width, in.height, err, kFloatBound);
        EXPECT_LE(err, kFloatBound);
        return;
    }
    const std::vector<float> exact = encode_on(random_mmproj(s, 5, true), "cpu", in, s.proj_dim);
    const double gpu_err = relative_l2(got, exact), cpu_err = relative_l2(want, exact);
    const double bound = std::max(1.25 * cpu_err, 1e-3);
    std::printf("%s %s %zux%zu: relative L2 to the exact tower GPU %.3g, CPU %.3g (bound %.3g); GPU vs CPU %.3g\n",
                s.projector.c_str(), dtype_name(s.type), in.width, in.height, gpu_err, cpu_err, bound, err);
    EXPECT_LE(gpu_err, bound);
}

TEST(CudaEncoders, Idefics3F16TowerMatchesCpu) {
    VisionShape s;
    s.projector = "idefics3";
    s.type = DType::F16;
    expect_vision_matches_cpu(s, random_image(64, 64, 21));
}

TEST(CudaEncoders, Idefics3Q8TowerMatchesCpu) {
    VisionShape s;
    s.projector = "idefics3";
    s.type = DType::Q8_0;
    s.n_embd = 128;  // Q8_0 rows: multiples of 32
    s.n_head = 4;
    s.n_ff = 224;
    s.proj_dim = 96;
    expect_vision_matches_cpu(s, random_image(64, 64, 22));
}

TEST(CudaEncoders, Lfm2F32TowerAtItsOwnSizeMatchesCpu) {
    VisionShape s;
    s.projector = "lfm2";
    s.type = DType::F32;
    // 48 x 80 pixels: a 6 x 10 patch grid, the 8 x 8 position grid resized to it (NaFlex).
    expect_vision_matches_cpu(s, random_image(48, 80, 23));
}

TEST(CudaEncoders, Lfm2F16TowerMatchesCpu) {
    VisionShape s;
    s.projector = "lfm2";
    s.type = DType::F16;
    expect_vision_matches_cpu(s, random_image(64, 64, 24));
}

// ---- Whisper -------------------------------------------------------------------------------------

struct WhisperShape {
    size_t n_mels = 80, n_embd = 96, n_head = 3, n_audio_ctx = 1500, n_text_ctx = 32, n_enc = 2, n_dec = 2;
    size_t n_vocab = 397;
    DType type = DType::F16;  // scripts/convert_whisper.py's default matrix type
};

// Token ids of the specials (at the top of the vocabulary, as in Whisper's).
constexpr int32_t kEot = 380, kSot = 381;

// A Whisper GGUF as scripts/convert_whisper.py writes it.
std::vector<uint8_t> random_whisper(const WhisperShape& s, uint32_t seed) {
    GgufWriter w;
    w.add_string("general.architecture", "whisper");
    w.add_string("general.name", "random-whisper");
    w.add_u32("whisper.n_mels", uint32_t(s.n_mels));
    w.add_u32("whisper.n_embd", uint32_t(s.n_embd));
    w.add_u32("whisper.n_head", uint32_t(s.n_head));
    w.add_u32("whisper.n_audio_ctx", uint32_t(s.n_audio_ctx));
    w.add_u32("whisper.n_text_ctx", uint32_t(s.n_text_ctx));
    w.add_u32("whisper.encoder.n_layer", uint32_t(s.n_enc));
    w.add_u32("whisper.decoder.n_layer", uint32_t(s.n_dec));
    w.add_u32("whisper.n_vocab", uint32_t(s.n_vocab));
    std::vector<std::string> tokens;
    for (size_t i = 0; i < s.n_vocab; ++i) tokens.push_back("t" + std::to_string(i));
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    const char* specials[] = {"eot",      "sot",    "transcribe",    "translate",
                              "sot_prev", "sot_lm", "no_timestamps", "no_speech"};
    for (size_t i = 0; i < 8; ++i) w.add_u32(std::string("whisper.token.") + specials[i], uint32_t(kEot + int32_t(i)));
    w.add_u32("whisper.token.timestamp_begin", uint32_t(kEot + 8));
    w.add_bool("whisper.multilingual", false);
    w.add_int_array("whisper.suppress_ids", GgufType::I32, {1, 2});
    w.add_int_array("whisper.suppress_ids_begin", GgufType::I32, {3, kEot});
    RandomTensors t(w, seed);
    const size_t d = s.n_embd;
    t.f32("mel_filters", {201, s.n_mels}, 0.01f, 0.01f);
    t.matrix("enc.conv1.weight", DType::F16, s.n_mels * 3, d);
    t.bias("enc.conv1.bias", d);
    t.matrix("enc.conv2.weight", DType::F16, d * 3, d);
    t.bias("enc.conv2.bias", d);
    t.f32("enc.pos", {s.n_audio_ctx * d}, 0.5f);
    t.f32("dec.pos", {s.n_text_ctx * d}, 0.5f);
    t.matrix("dec.token_embd", s.type, d, s.n_vocab);
    auto block = [&](const std::string& p, bool decoder) {
        t.norm(p + "attn_norm.weight", d);
        t.bias(p + "attn_norm.bias", d);
        t.matrix(p + "attn_qkv.weight", s.type, d, 3 * d);
        t.bias(p + "attn_qkv.bias", 3 * d);
        t.matrix(p + "attn_out.weight", s.type, d, d);
        t.bias(p + "attn_out.bias", d);
        t.norm(p + "ffn_norm.weight", d);
        t.bias(p + "ffn_norm.bias", d);
        t.matrix(p + "ffn_up.weight", s.type, d, 4 * d);
        t.bias(p + "ffn_up.bias", 4 * d);
        t.matrix(p + "ffn_down.weight", s.type, 4 * d, d);
        t.bias(p + "ffn_down.bias", d);
        if (!decoder) return;
        t.norm(p + "cross_norm.weight", d);
        t.bias(p + "cross_norm.bias", d);
        t.matrix(p + "cross_q.weight", s.type, d, d);
        t.bias(p + "cross_q.bias", d);
        t.matrix(p + "cross_kv.weight", s.type, d, 2 * d);
        t.bias(p + "cross_kv.bias", 2 * d);
        t.matrix(p + "cross_out.weight", s.type, d, d);
        t.bias(p + "cross_out.bias", d);
    };
    for (size_t il = 0; il < s.n_enc; ++il) block("enc.blk." + std::to_string(il) + ".", false);
    for (size_t il = 0; il < s.n_dec; ++il) block("dec.blk." + std::to_string(il) + ".", true);
    for (const char* side : {"enc", "dec"}) {
        t.norm(std::string(side) + ".norm.weight", d);
        t.bias(std::string(side) + ".norm.bias", d);
    }
    return w.to_bytes();
}

// A GGUF written to a file of its own (WhisperModel and cactus_init open a path), removed at the end.
struct TempGguf {
    std::string path;
    explicit TempGguf(const std::vector<uint8_t>& bytes) {
        char name[] = "/tmp/cactus_encoders_XXXXXX.gguf";
        const int fd = mkstemps(name, 5);
        EXPECT_GE(fd, 0) << "mkstemps";
        path = name;
        size_t done = 0;
        while (fd >= 0 && done < bytes.size()) {
            const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
            if (n <= 0) break;
            done += size_t(n);
        }
        EXPECT_EQ(done, bytes.size()) << "writing " << path;
        if (fd >= 0) close(fd);
    }
    ~TempGguf() { std::remove(path.c_str()); }
};

size_t argmax(const std::vector<float>& x, size_t from, size_t n) {
    return size_t(std::max_element(x.begin() + std::ptrdiff_t(from), x.begin() + std::ptrdiff_t(from + n)) -
                  x.begin()) -
           from;
}

TEST(CudaEncoders, WhisperEncoderAndGreedyDecodeMatchCpu) {
    std::string why;
    if (!testing::try_cuda(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
    const WhisperShape s;
    const TempGguf file(random_whisper(s, 31));
    std::unique_ptr<Backend> cpu_be = make_backend(BackendOptions{});
    BackendOptions on_gpu;
    on_gpu.device = "cuda";
    std::unique_ptr<Backend> gpu_be = make_backend(on_gpu);
    WhisperModel cpu(file.path, *cpu_be), gpu(file.path, *gpu_be);
    // One 30 s window of log-mel-like values.
    const std::vector<float> mel = testing::random_floats(cpu.hparams().n_frames() * s.n_mels, 32, -1.0f, 1.0f);
    cpu.encode(mel.data());
    gpu.encode(mel.data());
    std::vector<float> want, got;
    cpu.encoder_states(s.n_audio_ctx, &want);
    gpu.encoder_states(s.n_audio_ctx, &got);
    const double enc_err = relative_l2(got, want);
    std::printf("whisper encoder (%zu frames): relative L2 GPU vs CPU %.3g\n", s.n_audio_ctx, enc_err);
    EXPECT_LE(enc_err, kFloatBound);

    // Greedy: the prompt, then each model's own argmax; the tokens must agree where the CPU's choice
    // is clear (its top two logits further apart than the GPU's logits differ from the CPU's).
    std::vector<int32_t> tokens_cpu = {kSot}, tokens_gpu = {kSot};
    size_t compared = 0;
    for (size_t step = 0; step < 12; ++step) {
        const size_t n_past = tokens_cpu.size() - 1;
        const std::vector<float> lc = cpu.decode(&tokens_cpu.back(), 1, n_past);
        const std::vector<float> lg = gpu.decode(&tokens_gpu.back(), 1, n_past);
        EXPECT_LE(relative_l2(lg, lc), kFloatBound) << "step " << step;
        std::vector<float> sorted = lc;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        double diff = 0.0;
        for (size_t i = 0; i < lc.size(); ++i) diff = std::max(diff, double(std::fabs(lg[i] - lc[i])));
        const int32_t next_cpu = int32_t(argmax(lc, 0, lc.size())), next_gpu = int32_t(argmax(lg, 0, lg.size()));
        if (sorted[0] - sorted[1] <= 2.0 * diff) break;  // a near tie: either choice is right
        ASSERT_EQ(next_gpu, next_cpu) << "step " << step;
        ++compared;
        tokens_cpu.push_back(next_cpu);
        tokens_gpu.push_back(next_gpu);
    }
    std::printf("whisper greedy: %zu tokens equal\n", compared);
    EXPECT_GE(compared, 4u);
    // Each greedy step has the same kernel arguments (positions, cache rows and the window's mask
    // travel as data), so after the first few (eager, then captured) the steps replay one graph: on
    // an H100 8 of 12 replayed, after 2 captures.
    const BackendCounters counters = gpu_be->counters();
    std::printf("whisper decode steps: %llu graph replays, %llu captures\n", (unsigned long long)counters.graph_replays,
                (unsigned long long)counters.graph_captures);
    EXPECT_GE(counters.graph_replays + 4, compared) << "the greedy steps did not replay";

    // Two sequences forked from the greedy one (beam search): decode_slots writes each token's
    // key and value into its own slot and attends over that slot only.
    const size_t n_past = tokens_cpu.size();
    cpu.reserve_slots(2);
    gpu.reserve_slots(2);
    for (WhisperModel* m : {&cpu, &gpu}) {  // slot 0's rows again (reserve_slots dropped them)
        m->decode(tokens_cpu.data(), tokens_cpu.size(), 0);
        m->copy_slot(1, 0, n_past);
    }
    const int32_t next[2] = {kEot - 5, kEot - 9};
    const size_t slots[2] = {1, 0};
    const std::vector<float> sc = cpu.decode_slots(next, slots, 2, n_past);
    const std::vector<float> sg = gpu.decode_slots(next, slots, 2, n_past);
    EXPECT_LE(relative_l2(sg, sc), kFloatBound) << "two slots";
}

// ---- the device reaches the encoders (no GPU needed) ---------------------------------------------

// An environment variable set for one scope.
struct ScopedEnv {
    std::string name, old;
    bool had = false;
    ScopedEnv(const char* n, const char* value) : name(n) {
        const char* v = std::getenv(n);
        had = v != nullptr;
        if (had) old = v;
        setenv(n, value, 1);
    }
    ~ScopedEnv() {
        if (had)
            setenv(name.c_str(), old.c_str(), 1);
        else
            unsetenv(name.c_str());
    }
};

TEST(EncoderDevice, SpeechHandleTakesTheEnvironmentsDevice) {
    WhisperShape s;
    s.n_audio_ctx = 16;
    s.n_embd = 32;
    s.n_head = 2;
    s.n_enc = s.n_dec = 1;
    const TempGguf file(random_whisper(s, 41));
    {
        const ScopedEnv env("CACTUS_DEVICE", "tpu:3");
        cactus_model_t m = cactus_init(file.path.c_str(), nullptr, false);
        EXPECT_EQ(m, nullptr) << "a Whisper handle ignored CACTUS_DEVICE";
        if (m) cactus_destroy(m);
        EXPECT_NE(std::string(cactus_get_last_error()).find("'tpu:3'"), std::string::npos) << cactus_get_last_error();
    }
    const ScopedEnv env("CACTUS_DEVICE", "cpu");
    cactus_model_t m = cactus_init(file.path.c_str(), nullptr, false);
    ASSERT_NE(m, nullptr) << cactus_get_last_error();  // the file itself loads
    cactus_destroy(m);
}

TEST(EncoderDevice, VisionTowerRunsWhereItIsAsked) {
    VisionShape s;
    s.projector = "idefics3";
    s.type = DType::F32;
    s.n_layer = 1;
    const std::vector<uint8_t> bytes = random_mmproj(s, 6);
    std::unique_ptr<GgufFile> f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_STREQ(VisionEncoder(*f, BackendOptions{}).device(), "cpu");
    BackendOptions bogus;
    bogus.device = "tpu:3";
    try {
        VisionEncoder enc(*f, bogus);
        ADD_FAILURE() << "the tower loaded on " << enc.device() << " instead of refusing tpu:3";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'tpu:3'"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace cactus
