// KV cache probe for bench/kv_quality.py: loads a model with KV options, tokenizes a text file,
// feeds it in chunks and prints one JSON line per evaluated token window:
//   kv_probe MODEL TEXT_FILE OPTIONS_JSON [generate N | compare OPTIONS_JSON_B]
// OPTIONS_JSON keys: n_ctx, prefill_chunk, kv_cache_type, kv_compress, kv_compress_at,
// kv_compress_to, kv_compress_sinks, kv_compress_recent, threads, eval_from (tokens before
// scoring starts), max_tokens (tokens of the text used).
// Output: {"nll": [...]} with the negative log-likelihood of every scored token, the top-1 id of
// every scored token ("argmax"), kv_bytes and compactions; with "generate N", the greedy
// continuation's text after the whole text ("text").
// With "compare OPTIONS_JSON_B", a second model with options B reads the same tokens in the same
// chunks; for every scored token the probe prints the true KL divergence KL(P_A || P_B) of the two
// next-token distributions over the full vocabulary ("kl"), both NLLs ("nll", "nll_b"), both
// top-1 ids, and the KV bytes and compactions of both. OPTIONS_JSON_B may name another file of the
// same model with "model" (e.g. its F32 dequantization, bench/requantize.py): B then reads that file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

using namespace cactus;
using json = nlohmann::ordered_json;

static double nll_of(const float* logits, size_t n_vocab, int32_t target, int32_t* argmax) {
    float max = logits[0];
    size_t best = 0;
    for (size_t i = 1; i < n_vocab; ++i)
        if (logits[i] > max) max = logits[i], best = i;
    double sum = 0.0;
    for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
    *argmax = static_cast<int32_t>(best);
    return std::log(sum) - static_cast<double>(logits[target] - max);
}

// Log-softmax of one row of logits ([n_vocab]) into out (double), returning the argmax.
static int32_t log_softmax(const float* logits, size_t n_vocab, std::vector<double>* out) {
    out->resize(n_vocab);
    size_t best = 0;
    for (size_t i = 1; i < n_vocab; ++i)
        if (logits[i] > logits[best]) best = i;
    const double max = logits[best];
    double sum = 0.0;
    for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
    const double log_z = max + std::log(sum);
    for (size_t i = 0; i < n_vocab; ++i) (*out)[i] = static_cast<double>(logits[i]) - log_z;
    return static_cast<int32_t>(best);
}

// KL(P || Q) = sum_v P(v) (log P(v) - log Q(v)), from log-probabilities ([n_vocab] each).
static double kl_divergence(const std::vector<double>& log_p, const std::vector<double>& log_q) {
    double kl = 0.0;
    for (size_t i = 0; i < log_p.size(); ++i) kl += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
    return std::max(kl, 0.0);
}

static ModelOptions model_options(const json& o) {
    ModelOptions mo;
    mo.n_ctx = o.value("n_ctx", 0);
    mo.n_threads = o.value("threads", 2);
    mo.n_batch = o.value("prefill_chunk", 512);
    if (o.contains("kv_cache_type")) mo.kv.type = static_cast<int>(parse_kv_type(o["kv_cache_type"]));
    if (o.contains("kv_compress")) mo.kv.compress = o["kv_compress"].get<bool>() ? 1 : 0;
    mo.kv.compress_at = o.value("kv_compress_at", 0);
    mo.kv.compress_to = o.value("kv_compress_to", 0);
    mo.kv.compress_sinks = o.value("kv_compress_sinks", -1);
    mo.kv.compress_recent = o.value("kv_compress_recent", -1.0);
    return mo;
}

// Feeds ids to models A and B in the same chunks and scores every token from eval_from on.
static json compare_models(Model& a, Model& b, const std::vector<int32_t>& ids, size_t chunk, size_t eval_from) {
    const size_t n_vocab = a.info().n_vocab;
    if (b.info().n_vocab != n_vocab) fail("kv_probe compare: the two models differ in vocabulary size");
    json kl = json::array(), nll_a = json::array(), nll_b = json::array();
    json top_a = json::array(), top_b = json::array();
    std::vector<float> last, all_a, all_b;  // all_*: [n, n_vocab]
    std::vector<double> lp_a, lp_b;         // [n_vocab] log-probabilities of one position
    for (size_t done = 0; done + 1 < ids.size();) {
        const size_t n = std::min(chunk, ids.size() - 1 - done);
        const bool scored = done + n + 1 > eval_from;
        a.forward(ids.data() + done, n, &last, scored ? &all_a : nullptr);
        b.forward(ids.data() + done, n, &last, scored ? &all_b : nullptr);
        for (size_t t = 0; t < n && scored; ++t) {
            const size_t target = done + t + 1;
            if (target < eval_from) continue;
            top_a.push_back(log_softmax(all_a.data() + t * n_vocab, n_vocab, &lp_a));
            top_b.push_back(log_softmax(all_b.data() + t * n_vocab, n_vocab, &lp_b));
            nll_a.push_back(-lp_a[static_cast<size_t>(ids[target])]);
            nll_b.push_back(-lp_b[static_cast<size_t>(ids[target])]);
            kl.push_back(kl_divergence(lp_a, lp_b));
        }
        done += n;
    }
    return {{"tokens", ids.size()},
            {"kl", kl},
            {"nll", nll_a},
            {"nll_b", nll_b},
            {"argmax", top_a},
            {"argmax_b", top_b},
            {"kv_bytes", a.kv_bytes()},
            {"kv_bytes_b", b.kv_bytes()},
            {"compactions", a.kv_compactions()},
            {"compactions_b", b.kv_compactions()}};
}

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: kv_probe MODEL TEXT_FILE OPTIONS_JSON [generate N]\n");
        return 2;
    }
    try {
        json o = json::parse(argv[3]);
        std::ifstream in(argv[2], std::ios::binary);
        if (!in) fail("kv_probe: cannot read %s", argv[2]);
        std::stringstream ss;
        ss << in.rdbuf();
        auto file = GgufFile::open(argv[1]);
        auto tok = Tokenizer::from_gguf(*file);
        std::vector<int32_t> ids = tok->encode(ss.str(), false, true);
        if (tok->bos_id() >= 0) ids.insert(ids.begin(), tok->bos_id());
        const size_t max_tokens = o.value("max_tokens", ids.size());
        if (ids.size() > max_tokens) ids.resize(max_tokens);
        const ModelOptions mo = model_options(o);
        auto model = Model::load(*file, mo);
        const size_t n_vocab = model->info().n_vocab;
        const size_t eval_from = o.value("eval_from", 1);
        const size_t chunk = mo.n_batch;
        if (argc >= 6 && std::string(argv[4]) == "compare") {
            const json ob = json::parse(argv[5]);
            std::unique_ptr<GgufFile> other_file;
            if (ob.contains("model")) other_file = GgufFile::open(ob["model"].get<std::string>());
            auto other = Model::load(other_file ? *other_file : *file, model_options(ob));
            const json out = compare_models(*model, *other, ids, chunk, eval_from);
            std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
            return 0;
        }
        json nll = json::array(), argmax = json::array();
        std::vector<float> last, all;
        for (size_t done = 0; done + 1 < ids.size();) {
            const size_t n = std::min(chunk, ids.size() - 1 - done);
            const bool scored = done + n + 1 > eval_from;
            model->forward(ids.data() + done, n, &last, scored ? &all : nullptr);
            for (size_t t = 0; t < n && scored; ++t) {
                const size_t target = done + t + 1;
                if (target < eval_from) continue;
                int32_t best = 0;
                nll.push_back(nll_of(all.data() + t * n_vocab, n_vocab, ids[target], &best));
                argmax.push_back(best);
            }
            done += n;
        }
        json out = {{"tokens", ids.size()},
                    {"nll", nll},
                    {"argmax", argmax},
                    {"kv_bytes", model->kv_bytes()},
                    {"compactions", model->kv_compactions()}};
        if (argc >= 6 && std::string(argv[4]) == "generate") {
            const size_t n_gen = static_cast<size_t>(std::stoul(argv[5]));
            std::vector<int32_t> gen;
            int32_t next = ids.back();
            for (size_t i = 0; i < n_gen; ++i) {
                model->forward(&next, 1, &last);
                size_t best = 0;
                for (size_t v = 1; v < n_vocab; ++v)
                    if (last[v] > last[best]) best = v;
                next = static_cast<int32_t>(best);
                gen.push_back(next);
            }
            out["text"] = tok->decode(gen);
            out["compactions"] = model->kv_compactions();
        }
        std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kv_probe: %s\n", e.what());
        return 1;
    }
}
