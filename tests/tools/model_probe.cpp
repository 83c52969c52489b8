// Drives a model for the Python oracle tests (tests/models/test_model_oracle.py).
//
//   model_probe MODEL.gguf [--threads N] [--ctx N] [--batch N] [--kv-type f16|int8|f32] [--device D] [--anonymous]
//
// Reads one JSON request per stdin line and writes one JSON response line:
//   {"tokens": [...], "n_predict": 32}
//       -> {"generated": [...greedy ids...], "prefill_tok_s": x, "decode_tok_s": y}
//   {"tokens": [...], "score_from": P, "score_ids": [[ids], ...]}  (teacher forcing)
//       -> {"score_logprobs": [[log p(id)], ...], "argmax": [...]}  for the rows predicting
//          tokens P, P+1, ..., len-1 (score_ids[i] are the ids to report for row i).
//   {"tokens": [...prompt...], "chunk": C, "decode_ids": [...], "score_ids": [[ids], ...]}
//       -> {"decode_logprobs": [...], "decode_argmax": [...]}: the same scores from the
//          single-token decode path (prompt prefilled C tokens per call, then one token per step).
//   {"tokens": [...], "dump": ["layer_out", "attn_out", ...], "dump_to": "/abs/dir"}
//       -> {"dumped": {"layer_out": [n_layer, T, W], "embd": [T, W], ...}}: the named
//          intermediates (src/models/intermediates.h) of a teacher-forced pass over the tokens
//          (logits of every position), written as float32 .npy files <dir>/<name>.npy; per-layer
//          names stack their layers ([n_layer, T, W]; every layer must have produced the name).
// Both parts may be combined in one request. Errors -> {"error": "message"}.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"

using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int32_t argmax(const float* x, size_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

double log_sum_exp(const float* x, size_t n) {
    const float max = *std::max_element(x, x + n);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
    return max + std::log(sum);
}

void generate(cactus::Model& model, const std::vector<int32_t>& tokens, int n_predict, json& out) {
    model.reset();
    std::vector<float> logits;
    auto start = std::chrono::steady_clock::now();
    model.forward(tokens.data(), tokens.size(), &logits);
    const double prefill_s = seconds_since(start);
    std::vector<int32_t> generated;
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < n_predict; ++i) {
        const int32_t next = argmax(logits.data(), logits.size());
        generated.push_back(next);
        if (i + 1 < n_predict) model.forward(&next, 1, &logits);
    }
    const double decode_s = seconds_since(start);
    out["generated"] = generated;
    out["prefill_tok_s"] = tokens.size() / std::max(prefill_s, 1e-9);
    out["decode_tok_s"] = n_predict > 1 ? (n_predict - 1) / std::max(decode_s, 1e-9) : 0.0;
}

void score(cactus::Model& model, const std::vector<int32_t>& tokens, size_t score_from, const json& score_ids,
           json& out) {
    if (score_from == 0 || score_from > tokens.size()) cactus::fail("probe: bad score_from %zu", score_from);
    model.reset();
    // The prompt before the scored rows needs no logits: only the tail computes all of them.
    const size_t head = score_from - 1;
    std::vector<float> last, all;
    if (head > 0) model.forward(tokens.data(), head, &last);
    model.forward(tokens.data() + head, tokens.size() - head, nullptr, &all);
    const size_t n_vocab = model.info().n_vocab;
    json logprobs = json::array();
    json best = json::array();
    for (size_t row = head; row + 1 < tokens.size(); ++row) {
        const float* x = all.data() + (row - head) * n_vocab;
        const double lse = log_sum_exp(x, n_vocab);
        const size_t step = row + 1 - score_from;
        json values = json::array();
        if (step < score_ids.size()) {
            for (int64_t id : score_ids[step]) {
                if (id < 0 || static_cast<size_t>(id) >= n_vocab)
                    cactus::fail("probe: bad score id %lld", (long long)id);
                values.push_back(x[id] - lse);
            }
        }
        logprobs.push_back(values);
        best.push_back(argmax(x, n_vocab));
    }
    out["score_logprobs"] = logprobs;
    out["argmax"] = best;
}

// The single-token decode path under teacher forcing: prefill `tokens` in calls of at most
// `chunk` tokens, then feed decode_ids one at a time; step i reports log p(score_ids[i]) from the
// logits that predict decode_ids[i] (step 0: the prefill's last row, then each decode step's).
void decode_score(cactus::Model& model, const std::vector<int32_t>& tokens, size_t chunk,
                  const std::vector<int32_t>& decode_ids, const json& score_ids, json& out) {
    if (chunk == 0 || tokens.empty()) cactus::fail("probe: bad chunk %zu or empty prompt", chunk);
    model.reset();
    std::vector<float> logits;
    for (size_t done = 0; done < tokens.size(); done += chunk) {
        model.forward(tokens.data() + done, std::min(chunk, tokens.size() - done), &logits);
    }
    const size_t n_vocab = model.info().n_vocab;
    json logprobs = json::array();
    json best = json::array();
    for (size_t step = 0; step < decode_ids.size() && step < score_ids.size(); ++step) {
        if (step > 0) model.forward(&decode_ids[step - 1], 1, &logits);
        const double lse = log_sum_exp(logits.data(), n_vocab);
        json values = json::array();
        for (int64_t id : score_ids[step]) {
            if (id < 0 || static_cast<size_t>(id) >= n_vocab) cactus::fail("probe: bad score id %lld", (long long)id);
            values.push_back(logits[static_cast<size_t>(id)] - lse);
        }
        logprobs.push_back(values);
        best.push_back(argmax(logits.data(), n_vocab));
    }
    out["decode_logprobs"] = logprobs;
    out["decode_argmax"] = best;
}

// A float32 .npy file (format 1.0) of the given shape.
void write_npy(const std::string& path, const std::vector<size_t>& shape, const std::vector<float>& data) {
    std::string dims;
    for (size_t d : shape) dims += std::to_string(d) + ", ";
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) cactus::fail("probe: cannot write %s", path.c_str());
    const uint16_t len = static_cast<uint16_t>(header.size());
    std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    std::fwrite(&len, sizeof(len), 1, f);
    std::fwrite(header.data(), 1, header.size(), f);
    std::fwrite(data.data(), sizeof(float), data.size(), f);
    if (std::fclose(f) != 0) cactus::fail("probe: cannot write %s", path.c_str());
}

void dump(cactus::Model& model, const std::vector<int32_t>& tokens, const std::vector<std::string>& names,
          const std::string& dir, json& out) {
    if (dir.empty()) cactus::fail("probe: dump needs dump_to");
    model.reset();
    model.record_intermediates(names);
    std::vector<float> all;
    try {
        model.forward(tokens.data(), tokens.size(), nullptr, &all);
    } catch (...) {
        model.record_intermediates({});
        throw;
    }
    cactus::Intermediates rec = model.take_intermediates();
    model.record_intermediates({});
    const size_t n_layer = model.info().n_layer;
    json dumped = json::object();
    for (const std::string& name : names) {
        std::vector<size_t> shape;
        std::vector<float> data;
        if (auto it = rec.find(name); it != rec.end()) {
            shape = {it->second.data.size() / it->second.width, it->second.width};
            data = std::move(it->second.data);
        } else if (rec.count(name + ".0")) {
            for (size_t il = 0; il < n_layer; ++il) {
                auto layer = rec.find(name + "." + std::to_string(il));
                if (layer == rec.end()) cactus::fail("probe: %s has no layer %zu", name.c_str(), il);
                const cactus::RecordedTensor& r = layer->second;
                if (il == 0) shape = {n_layer, r.data.size() / r.width, r.width};
                if (r.data.size() != shape[1] * shape[2])
                    cactus::fail("probe: %s.%zu has another shape", name.c_str(), il);
                data.insert(data.end(), r.data.begin(), r.data.end());
            }
        } else {
            continue;  // not a tensor of this architecture
        }
        write_npy(dir + "/" + name + ".npy", shape, data);
        dumped[name] = shape;
    }
    out["dumped"] = dumped;
}

json handle(cactus::Model& model, const std::string& line) {
    json request = json::parse(line);
    std::vector<int32_t> tokens = request.at("tokens").get<std::vector<int32_t>>();
    json out = json::object();
    if (request.contains("dump")) {
        dump(model, tokens, request["dump"].get<std::vector<std::string>>(), request.value("dump_to", std::string()),
             out);
    }
    if (request.contains("n_predict")) generate(model, tokens, request["n_predict"].get<int>(), out);
    if (request.contains("decode_ids")) {
        decode_score(model, tokens, request.value("chunk", size_t(512)),
                     request["decode_ids"].get<std::vector<int32_t>>(), request.value("score_ids", json::array()), out);
    } else if (request.contains("score_from")) {
        score(model, tokens, request["score_from"].get<size_t>(), request.value("score_ids", json::array()), out);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(
            stderr,
            "usage: %s MODEL.gguf [--threads N] [--ctx N] [--batch N] [--kv-type T] [--device D] [--anonymous]\n",
            argv[0]);
        return 2;
    }
    cactus::ModelOptions options;
    options.n_ctx = 4096;
    bool anonymous = false;
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--anonymous") {
            anonymous = true;
        } else if (i + 1 < argc && arg == "--threads") {
            options.n_threads = std::atoi(argv[++i]);
        } else if (i + 1 < argc && arg == "--ctx") {
            options.n_ctx = std::strtoull(argv[++i], nullptr, 10);
        } else if (i + 1 < argc && arg == "--batch") {
            options.n_batch = std::strtoull(argv[++i], nullptr, 10);
        } else if (i + 1 < argc && arg == "--device") {
            options.device = argv[++i];
        } else if (i + 1 < argc && arg == "--kv-type") {
            try {
                options.kv.type = static_cast<int>(cactus::parse_kv_type(argv[++i]));
            } catch (const std::exception& e) {
                std::fprintf(stderr, "model_probe: %s\n", e.what());
                return 2;
            }
        } else {
            std::fprintf(stderr, "model_probe: unknown argument %s\n", arg.c_str());
            return 2;
        }
    }
    try {
        auto file = cactus::GgufFile::open(argv[1]);
        for (const std::string& table : cactus::Model::mapped_tables(*file)) file->keep_mapped(table);
        if (anonymous) file->copy_into_anonymous_memory();
        auto model = cactus::Model::load(*file, options);
        std::string line;
        while (std::getline(std::cin, line)) {
            if (line.empty()) continue;
            json out;
            try {
                out = handle(*model, line);
            } catch (const std::exception& e) {
                out = json{{"error", e.what()}};
            }
            std::cout << out.dump() << std::endl;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "model_probe: %s\n", e.what());
        return 1;
    }
    return 0;
}
