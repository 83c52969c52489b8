// Drives the vision pipeline for the Python tests (tests/models/vision/test_vision_oracle.py).
//
//   vision_probe resize IMAGE W H bilinear|bicubic|lanczos|torch-bilinear OUT.rgb
//       writes the Pillow-exact resize of IMAGE as raw RGB bytes [H, W, 3] (torch-bilinear: torch's
//       uint8 antialiased bilinear resize, resize_image_torch)
//   vision_probe encode MMPROJ IMAGE OUT_PREFIX [--threads N] [--max-tokens N]
//       preprocesses IMAGE as the projector's family does (gemma3: one part, the stretched square;
//       gemma4v: one part, gemma4_image at --max-tokens, 280 by default)
//       and encodes every part; writes
//       OUT_PREFIX.rgb (the parts' pixels, global image first, then the tiles row-major),
//       OUT_PREFIX.f32 (their embeddings, same order) and prints JSON:
//       {"grid_x", "grid_y", "parts", "layout", "side", "tokens_per_part", "n_embd", "encode_ms",
//        "part_sizes": [[w, h], ...], "part_tokens": [n, ...]} (lfm2's parts differ in size: the
//       single image or thumbnail first, then the 512-px tiles)
//       (layout: the image's prompt pieces, {"text": markers} or {"part": index into the parts})
//   vision_probe generate TEXT MMPROJ IMAGE OUT.f32 [--chunk N] [--n 16] [--threads N] [--n-batch N]
//                         [--causal 1]
//       the image's prompt (the family's layout, no BOS) prefilled in chunks of N tokens; writes the
//       first-token logits to OUT.f32 and prints {"tokens": [ids, -1 for image rows],
//       "greedy": [n ids], "prefill_ms"}; --causal 1 prefills bidirectional image spans causally
//       (a control for the tests: Gemma 3's image rows must see each other)
//   vision_probe gemma4-prefill TEXT MMPROJ IMAGE OUT.f32 --before IDS --after IDS --boi ID --eoi ID
//                               [--max-tokens 280] [--chunk N] [--threads N]
//       Gemma 4's image prompt with the marker ids given (test vocabularies lack "<|image>"): the ids
//       BEFORE (comma-separated), boi, the image's rows, eoi, the ids AFTER, prefilled; writes the
//       last row's logits (F32 KV cache) to OUT.f32 and prints {"tokens", "prefill_ms"}
//   vision_probe lfm2-plan W H [W H ...]
//       LFM2-VL's preprocessing plan of each size (released defaults: 16-px patches, downsample 2,
//       64..256 tokens, 512-px tiles, 2..10 tiles): prints [{"size", "tiled", "grid", "thumb"}, ...]
// Errors -> {"error": "message"} on stdout and exit status 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/media/media_prompt.h"
#include "gguf/gguf.h"
#include "media/image.h"
#include "models/model.h"
#include "models/vision/preprocess.h"
#include "models/vision/vision_encoder.h"
#include "tokenizer/tokenizer.h"

using nlohmann::json;

namespace {

void write_file(const std::string& path, const void* data, size_t bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) cactus::fail("vision_probe: cannot write %s", path.c_str());
    std::fwrite(data, 1, bytes, f);
    std::fclose(f);
}

cactus::ResizeFilter parse_filter(const std::string& s) {
    if (s == "bilinear") return cactus::ResizeFilter::BILINEAR;
    if (s == "bicubic") return cactus::ResizeFilter::BICUBIC;
    if (s == "lanczos") return cactus::ResizeFilter::LANCZOS;
    cactus::fail("vision_probe: unknown filter %s", s.c_str());
}

int resize(int argc, char** argv) {
    if (argc != 7) cactus::fail("usage: vision_probe resize IMAGE W H FILTER OUT.rgb");
    const cactus::Image img = cactus::load_image(argv[2]);
    const bool torch = std::strcmp(argv[5], "torch-bilinear") == 0;
    const cactus::Image out =
        torch
            ? cactus::resize_image_torch(img, std::stoul(argv[3]), std::stoul(argv[4]), cactus::ResizeFilter::BILINEAR)
            : cactus::resize_image(img, std::stoul(argv[3]), std::stoul(argv[4]), parse_filter(argv[5]));
    write_file(argv[6], out.rgb.data(), out.rgb.size());
    std::printf("%s\n", json{{"width", out.width}, {"height", out.height}}.dump().c_str());
    return 0;
}

int encode(int argc, char** argv) {
    if (argc < 5)
        cactus::fail(
            "usage: vision_probe encode MMPROJ IMAGE OUT_PREFIX [--threads N] [--max-tokens N (gemma4v)] "
            "[--device D] [--runs N: after one warm-up, encode_ms is the fastest of N]");
    cactus::BackendOptions options;
    size_t max_tokens = 280;
    int runs = 0;  // 0: one cold run (the oracle tests)
    for (int i = 5; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--threads") == 0) options.n_threads = std::stoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--max-tokens") == 0) max_tokens = std::stoul(argv[i + 1]);
        if (std::strcmp(argv[i], "--device") == 0) options.device = argv[i + 1];
        if (std::strcmp(argv[i], "--runs") == 0) runs = std::stoi(argv[i + 1]);
    }
    const auto file = cactus::GgufFile::open(argv[2]);
    cactus::VisionEncoder enc(*file, options);
    const cactus::VisionHParams& hp = enc.hparams();
    const cactus::Image img = cactus::load_image(argv[3]);
    const bool gemma3 = hp.projector == "gemma3", lfm2 = hp.projector == "lfm2", gemma4 = hp.projector == "gemma4v";
    cactus::TiledImage tiled;  // gemma3, gemma4v: the resized image as the one part, no tiles
    if (gemma3)
        tiled.overview = cactus::gemma3_image(img, hp.image_size);
    else if (gemma4)
        tiled.overview = cactus::gemma4_image(img, max_tokens);
    else if (lfm2)
        tiled = cactus::lfm2_tiles(img, cactus::lfm2_config(hp));
    else
        tiled = cactus::idefics3_tiles(img, hp.image_size, hp.longest_edge);
    std::vector<const cactus::Image*> parts = {&tiled.overview};
    for (const cactus::Image& t : tiled.tiles) parts.push_back(&t);
    std::vector<uint8_t> rgb;
    std::vector<float> embd, one;
    size_t per_part = 0;
    json part_sizes = json::array(), part_tokens = json::array();
    std::vector<cactus::EncoderInput> inputs;  // the parts' planes (preprocessing, not timed)
    for (const cactus::Image* part : parts) {
        rgb.insert(rgb.end(), part->rgb.begin(), part->rgb.end());
        cactus::EncoderInput in;
        in.width = part->width;
        in.height = part->height;
        in.planes = gemma4 ? cactus::gemma4_planes(*part) : cactus::normalize_planes(*part, hp.mean, hp.std);
        part_sizes.push_back({part->width, part->height});
        part_tokens.push_back(enc.tokens(in));
        inputs.push_back(std::move(in));
    }
    double ms = 0.0;                         // encoder + projector over every part
    for (int run = 0; run <= runs; ++run) {  // runs > 0: run 0 is the warm-up
        embd.clear();
        const auto start = std::chrono::steady_clock::now();
        for (const cactus::EncoderInput& in : inputs) {
            enc.encode(in, &one);
            embd.insert(embd.end(), one.begin(), one.end());
        }
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (runs == 0 || run == 1 || t < ms) ms = t;
    }
    per_part = part_tokens.back().get<size_t>();
    write_file(std::string(argv[4]) + ".rgb", rgb.data(), rgb.size());
    write_file(std::string(argv[4]) + ".f32", embd.data(), embd.size() * sizeof(float));
    json layout = json::array();
    const std::vector<cactus::LayoutPiece> pieces =
        gemma3   ? std::vector<cactus::LayoutPiece>{{"<start_of_image>", -1}, {"", 0}, {"<end_of_image>", -1}}
        : gemma4 ? std::vector<cactus::LayoutPiece>{{"<|image>", -1}, {"", 0}, {"<image|>", -1}}
        : lfm2   ? cactus::lfm2_layout(tiled.grid_x, tiled.grid_y)
                 : cactus::idefics3_layout(tiled.grid_x, tiled.grid_y);
    for (const cactus::LayoutPiece& piece : pieces)
        layout.push_back(piece.part < 0 ? json{{"text", piece.text}} : json{{"part", piece.part}});
    std::printf("%s\n", json{{"grid_x", tiled.grid_x},
                             {"grid_y", tiled.grid_y},
                             {"parts", parts.size()},
                             {"layout", layout},
                             {"side", hp.image_size},
                             {"tokens_per_part", per_part},
                             {"n_embd", hp.proj_dim},
                             {"encode_ms", ms},
                             {"part_sizes", part_sizes},
                             {"part_tokens", part_tokens}}
                            .dump()
                            .c_str());
    return 0;
}

int generate(int argc, char** argv) {
    if (argc < 6) cactus::fail("usage: vision_probe generate TEXT MMPROJ IMAGE OUT.f32 [--chunk N] [--n N]");
    size_t chunk = 0, n_gen = 16;
    bool causal = false;
    cactus::BackendOptions options;
    cactus::ModelOptions mo;
    for (int i = 6; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--chunk") == 0) chunk = std::stoul(argv[i + 1]);
        if (std::strcmp(argv[i], "--n") == 0) n_gen = std::stoul(argv[i + 1]);
        if (std::strcmp(argv[i], "--threads") == 0) options.n_threads = mo.n_threads = std::stoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--n-batch") == 0) mo.n_batch = std::stoul(argv[i + 1]);
        if (std::strcmp(argv[i], "--causal") == 0) causal = std::strcmp(argv[i + 1], "1") == 0;
    }
    const auto text = cactus::GgufFile::open(argv[2]);
    const auto mmproj = cactus::GgufFile::open(argv[3]);
    mo.n_ctx = 4096;
    auto model = cactus::Model::load(*text, mo);
    auto tok = cactus::Tokenizer::from_gguf(*text);
    cactus::VisionEncoder enc(*mmproj, options);
    cactus::MediaPrompt prompt;
    prompt.n_embd = model->info().n_embd;
    cactus::append_image(&prompt, cactus::load_image(argv[4]), enc, cactus::MarkerVocab(*tok));
    if (causal) std::fill(prompt.group.begin(), prompt.group.end(), -1);
    std::vector<float> logits;
    const auto start = std::chrono::steady_clock::now();
    cactus::prefill_media(*model, prompt, 0, prompt.tokens.size(), chunk, 0, &logits);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    write_file(argv[5], logits.data(), logits.size() * sizeof(float));
    std::vector<int32_t> greedy;
    for (size_t i = 0; i < n_gen; ++i) {
        const int32_t id = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        greedy.push_back(id);
        model->forward(&id, 1, &logits);
    }
    std::printf("%s\n", json{{"tokens", prompt.tokens}, {"greedy", greedy}, {"prefill_ms", ms}}.dump().c_str());
    return 0;
}

std::vector<int32_t> parse_ids(const std::string& s) {
    std::vector<int32_t> ids;
    for (size_t at = 0; at < s.size();) {
        const size_t comma = std::min(s.find(',', at), s.size());
        ids.push_back(std::stoi(s.substr(at, comma - at)));
        at = comma + 1;
    }
    return ids;
}

int gemma4_prefill(int argc, char** argv) {
    if (argc < 6) cactus::fail("usage: vision_probe gemma4-prefill TEXT MMPROJ IMAGE OUT.f32 --before IDS ...");
    std::vector<int32_t> before, after, boi, eoi;
    size_t chunk = 0, max_tokens = 280;
    cactus::BackendOptions options;
    cactus::ModelOptions mo;
    for (int i = 6; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--before") before = parse_ids(value);
        if (flag == "--after") after = parse_ids(value);
        if (flag == "--boi") boi = parse_ids(value);
        if (flag == "--eoi") eoi = parse_ids(value);
        if (flag == "--max-tokens") max_tokens = std::stoul(value);
        if (flag == "--chunk") chunk = std::stoul(value);
        if (flag == "--threads") options.n_threads = mo.n_threads = std::stoi(value);
    }
    const auto text = cactus::GgufFile::open(argv[2]);
    const auto mmproj = cactus::GgufFile::open(argv[3]);
    mo.n_ctx = 4096;
    mo.kv.type = static_cast<int>(cactus::KvType::F32);  // the oracle's precision: no f16 rounding of K and V
    auto model = cactus::Model::load(*text, mo);
    cactus::VisionEncoder enc(*mmproj, options);
    cactus::MediaPrompt prompt;
    prompt.n_embd = model->info().n_embd;
    for (int32_t id : before) prompt.push_token(id);
    cactus::append_gemma4_image(&prompt, cactus::load_image(argv[4]), enc, boi, eoi, max_tokens);
    for (int32_t id : after) prompt.push_token(id);
    std::vector<float> logits;
    const auto start = std::chrono::steady_clock::now();
    cactus::prefill_media(*model, prompt, 0, prompt.tokens.size(), chunk, 0, &logits);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    write_file(argv[5], logits.data(), logits.size() * sizeof(float));
    std::printf("%s\n", json{{"tokens", prompt.tokens}, {"prefill_ms", ms}}.dump().c_str());
    return 0;
}

int lfm2_plan(int argc, char** argv) {
    if (argc < 4 || argc % 2 != 0) cactus::fail("usage: vision_probe lfm2-plan W H [W H ...]");
    const cactus::Lfm2Config c;
    json out = json::array();
    for (int i = 2; i + 1 < argc; i += 2) {
        const size_t w = std::stoul(argv[i]), h = std::stoul(argv[i + 1]);
        const bool tiled = cactus::lfm2_needs_tiles(w, h, c);
        const auto thumb = cactus::lfm2_smart_size(w, h, c);
        const auto grid = tiled ? cactus::lfm2_grid(w, h, c) : std::pair<size_t, size_t>{0, 0};
        out.push_back({{"size", {w, h}},
                       {"tiled", tiled},
                       {"grid", {grid.first, grid.second}},
                       {"thumb", {thumb.first, thumb.second}}});
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc >= 2 && std::strcmp(argv[1], "resize") == 0) return resize(argc, argv);
        if (argc >= 2 && std::strcmp(argv[1], "encode") == 0) return encode(argc, argv);
        if (argc >= 2 && std::strcmp(argv[1], "generate") == 0) return generate(argc, argv);
        if (argc >= 2 && std::strcmp(argv[1], "lfm2-plan") == 0) return lfm2_plan(argc, argv);
        if (argc >= 2 && std::strcmp(argv[1], "gemma4-prefill") == 0) return gemma4_prefill(argc, argv);
        cactus::fail("usage: vision_probe resize|encode|generate|lfm2-plan|gemma4-prefill ...");
    } catch (const std::exception& e) {
        std::printf("%s\n", json{{"error", e.what()}}.dump().c_str());
        return 1;
    }
}
