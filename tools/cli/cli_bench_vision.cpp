// cactus bench MODEL --mmproj MMPROJ.gguf [--image FILE]: image encode speed (decode + preprocess +
// vision encoder + projector, ms per image) and the prefill of a prompt holding the image, per
// thread count. Without --image the image is a generated 640x480 gradient (a BMP in memory).
//
// Method: the engine loads the text model with the mmproj (so a projector that does not fit the
// model is refused as `cactus run` refuses it); a second encoder over the same mmproj file is timed
// alone. One warm-up run of each test, then `reps` repetitions; median, min, max.
//   encode:  image bytes -> decoded -> the family's tiles -> encoder -> projector rows.
//   prefill: from an empty cache, kImageMarker + a short text; the image's rows are already encoded
//            (the engine keeps the last call's images), so this is the prefill of its rows alone.
//   ttft:    encode + prefill of the same repetition.
// The audio tower's numbers follow (cli_bench_audio.cpp); an mmproj without a vision or an audio
// tower gets that section marked skipped.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "cli_bench_media.h"
#include "cli_common.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/media/media_prompt.h"
#include "engine/model_store.h"
#include "gguf/gguf.h"
#include "media/image.h"
#include "models/vision/vision_encoder.h"

namespace cactus::cli {

namespace {

using Json = nlohmann::ordered_json;

void put_le(std::vector<uint8_t>* out, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out->push_back(uint8_t(v >> (8 * i)));
}

// A width x height 24-bit BMP of a colour gradient with a checker pattern: [54 + rows * stride] bytes.
std::vector<uint8_t> generated_bmp(uint32_t width, uint32_t height) {
    const uint32_t stride = (width * 3 + 3) / 4 * 4;
    std::vector<uint8_t> out;
    out.push_back('B');
    out.push_back('M');
    put_le(&out, 54 + stride * height, 4);
    put_le(&out, 0, 4);
    put_le(&out, 54, 4);
    put_le(&out, 40, 4);
    put_le(&out, width, 4);
    put_le(&out, height, 4);
    put_le(&out, 1, 2);
    put_le(&out, 24, 2);
    for (int i = 0; i < 6; ++i) put_le(&out, 0, 4);
    for (uint32_t y = 0; y < height; ++y) {
        const size_t row_start = out.size();
        for (uint32_t x = 0; x < width; ++x) {
            const bool check = ((x / 32) + (y / 32)) % 2 == 0;
            out.push_back(uint8_t(255 * x / width));   // blue
            out.push_back(uint8_t(255 * y / height));  // green
            out.push_back(uint8_t(check ? 200 : 40));  // red
        }
        while (out.size() - row_start < stride) out.push_back(0);
    }
    return out;
}

struct VisionResult {
    int threads = 0;
    std::string device;  // where the encoder ran (VisionEncoder::device)
    BenchStats encode_ms, prefill_ms, ttft_ms;
    size_t image_tokens = 0;   // rows of image embeddings per image
    size_t layout_tokens = 0;  // the image's whole layout: rows plus marker tokens
    size_t prompt_tokens = 0;  // the prefill test's prompt
};

// Seconds of one encode: the bytes decoded, then the family's layout built (tiles, encoder, projector).
double time_encode(const ImageInput& image, VisionEncoder& encoder, const MarkerVocab& vocab, size_t n_embd,
                   MediaPrompt* layout) {
    const BenchClock::time_point start = BenchClock::now();
    const Image img = decode_image(image.bytes.data(), image.bytes.size(), image.name);
    *layout = MediaPrompt();
    layout->n_embd = n_embd;
    append_image(layout, img, encoder, vocab);
    return bench_ms_since(start);
}

VisionResult bench_vision_threads(const std::string& model_path, const std::string& mmproj_path,
                                  const ImageInput& image, int threads, int reps, const std::string& device) {
    EngineOptions options;
    options.n_threads = threads;
    options.device = device;
    options.mmproj_path = mmproj_path;
    std::unique_ptr<Engine> engine = Engine::load(model_path, options);  // refuses an mmproj that is not a pair
    std::unique_ptr<GgufFile> mmproj = GgufFile::open(mmproj_path);
    VisionEncoder encoder(*mmproj, engine->encoder_options(threads));  // the engine's own encoder's device
    const MarkerVocab vocab(engine->tokenizer());
    const size_t n_embd = engine->model().info().n_embd;
    const std::string prompt = std::string(kImageMarker) + "Describe the image.";
    const std::vector<ImageInput> images{image};

    VisionResult r;
    r.threads = threads;
    r.device = encoder.device();
    MediaPrompt layout;
    time_encode(image, encoder, vocab, n_embd, &layout);  // warm-up
    engine->reset();
    engine->prefill_with_images(prompt, images);
    std::vector<double> encode, prefill, ttft;
    for (int rep = 0; rep < reps; ++rep) {
        const double e = time_encode(image, encoder, vocab, n_embd, &layout);
        engine->reset();
        const CompletionMetrics m = engine->prefill_with_images(prompt, images);
        encode.push_back(e);
        prefill.push_back(m.time_to_first_token_ms);
        ttft.push_back(e + m.time_to_first_token_ms);
        r.prompt_tokens = m.prefill_tokens;
    }
    for (int32_t id : layout.tokens) r.image_tokens += id < 0 ? 1 : 0;
    r.layout_tokens = layout.tokens.size();
    r.encode_ms = bench_stats(encode);
    r.prefill_ms = bench_stats(prefill);
    r.ttft_ms = bench_stats(ttft);
    return r;
}

Json result_json(const VisionResult& r) {
    return Json{{"threads", r.threads},
                {"device", r.device},
                {"image_tokens", r.image_tokens},
                {"layout_tokens", r.layout_tokens},
                {"encode_ms", bench_stats_json(r.encode_ms)},
                {"prefill",
                 {{"prompt_tokens", r.prompt_tokens},
                  {"ms", bench_stats_json(r.prefill_ms)},
                  {"tokens_per_second", r.prefill_ms.median > 0 ? 1e3 * r.prompt_tokens / r.prefill_ms.median : 0.0}}},
                {"ttft_ms", bench_stats_json(r.ttft_ms)}};
}

void print_results(const std::string& model, const std::string& mmproj, const std::string& image_name,
                   const std::vector<VisionResult>& results, int reps) {
    std::printf("model: %s\nmmproj: %s\nimage: %s\nencoder on: %s\n", model.c_str(), mmproj.c_str(), image_name.c_str(),
                results.empty() ? "-" : results.front().device.c_str());
    std::printf(
        "%d repetitions after 1 warm-up; encode = decode + preprocess + encoder + projector per image;\n"
        "prefill = the image's rows and a short text from an empty cache; TTFT = encode + prefill\n\n",
        reps);
    std::printf("threads | img tok | encode ms med |   min   |   max   | prefill ms | prefill tok |   TTFT ms\n");
    std::printf("--------+---------+---------------+---------+---------+------------+-------------+----------\n");
    for (const VisionResult& r : results)
        std::printf("%7d | %7zu | %13.1f | %7.1f | %7.1f | %10.1f | %11zu | %9.1f\n", r.threads, r.image_tokens,
                    r.encode_ms.median, r.encode_ms.min, r.encode_ms.max, r.prefill_ms.median, r.prompt_tokens,
                    r.ttft_ms.median);
}

}  // namespace

int run_vision_bench(const std::string& model, const std::string& mmproj, const std::string& image_path,
                     const std::vector<int>& threads, int reps, bool json, const std::string& device) {
    const std::string model_path = resolve_model_path(model);
    const std::string mmproj_path = resolve_mmproj_path(model, mmproj);
    if (mmproj_path.empty()) {
        const char* why = "no vision projector: pass --mmproj, set $CACTUS_MMPROJ or put the mmproj beside the model";
        if (json)
            std::printf(
                "%s\n",
                Json{{"engine", "cactus"}, {"model", model_path}, {"vision", {{"skipped", why}}}}.dump(2).c_str());
        else
            std::printf("vision bench skipped: %s\n", why);
        return 0;
    }
    std::vector<int> counts;
    for (int t : threads.empty() ? std::vector<int>{0} : threads)
        counts.push_back(t > 0 ? t : ThreadPool::default_threads());
    if (!mmproj_path_has_vision(mmproj_path)) {
        const char* why = "the mmproj has no vision tower";
        if (!json) std::printf("vision bench skipped: %s\n", why);
        const Json audio = run_audio_bench(model_path, mmproj_path, counts, reps, json, device);
        if (json)
            std::printf("%s\n", Json{{"engine", "cactus"},
                                     {"model", model_path},
                                     {"mmproj", mmproj_path},
                                     {"vision", {{"skipped", why}}},
                                     {"audio", audio}}
                                    .dump(2)
                                    .c_str());
        return 0;
    }
    ImageInput image;
    if (image_path.empty()) {
        image.name = "<generated 640x480 BMP>";
        image.bytes = generated_bmp(640, 480);
    } else {
        image.name = image_path;
        image.bytes = read_image_file(image_path);
    }
    std::vector<VisionResult> results;
    for (int n : counts) {
        if (!json) std::fprintf(stderr, "bench: vision, %d thread(s)...\n", n);
        results.push_back(bench_vision_threads(model_path, mmproj_path, image, n, reps, device));
    }
    if (!json) {
        print_results(model_path, mmproj_path, image.name, results, reps);
        run_audio_bench(model_path, mmproj_path, counts, reps, json, device);
        return 0;
    }
    Json out = Json::array();
    for (const VisionResult& r : results) out.push_back(result_json(r));
    const Json doc{{"engine", "cactus"},
                   {"model", model_path},
                   {"mmproj", mmproj_path},
                   {"image", image.name},
                   {"image_bytes", image.bytes.size()},
                   {"reps", reps},
                   {"warmup", 1},
                   {"vision", {{"results", out}}},
                   {"audio", run_audio_bench(model_path, mmproj_path, counts, reps, json, device)}};
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
}

}  // namespace cactus::cli
