// Retrieval quality of CorpusIndex on a known-item benchmark (bench/rag_corpus.py builds the
// Debian man-page one): every query has one answer file; a ranking of chunks becomes a ranking of
// files (first chunk of each file), and the answer's rank gives recall@1/5/10, MRR@10 and
// nDCG@10 (one relevant item: 1/log2(1 + rank)).
//   rag_eval --corpus DIR --queries FILE.jsonl (--model EMBEDDER.gguf | --fake)
//            [--threads N] [--index-root DIR] [--limit N] [--label NAME] [--out ROWS.jsonl]
// Prints one JSON object: the index, timings and a row per ranking (bm25, vector, hybrid
// variants); --out appends the rows to a JSON-lines file.
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "engine/corpus_embedder.h"
#include "engine/embedding.h"
#include "engine/retrieval/bm25.h"
#include "engine/retrieval/corpus_index.h"

namespace {

using namespace cactus;

struct Query {
    std::string text, answer;
};

std::vector<Query> read_queries(const std::string& path, size_t limit) {
    std::ifstream f(path);
    if (!f) fail("rag_eval: cannot read %s", path.c_str());
    std::vector<Query> out;
    for (std::string line; std::getline(f, line) && out.size() < limit;) {
        if (line.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(line);
        out.push_back({j.at("query").get<std::string>(), j.at("answer").get<std::string>()});
    }
    return out;
}

size_t count_words(const std::string& s) { return bm25_terms(s).size(); }

// Hashed bag of words: tests the pipeline without a model (lexical, so close to BM25).
CorpusEmbedder fake_embedder() {
    CorpusEmbedder e{"fake-bow-256", 256, count_words, nullptr, nullptr};
    e.embed = [](const std::vector<std::string>& texts) {
        std::vector<std::vector<float>> out;
        for (const std::string& t : texts) {
            std::vector<float> v(256, 0.0f);
            for (const std::string& term : bm25_terms(t)) v[std::hash<std::string>()(term) % 256] += 1.0f;
            v[0] += 1e-3f;
            l2_normalize(&v);
            out.push_back(std::move(v));
        }
        return out;
    };
    return e;
}

// The engine's encoder (TextEmbedder::load_encoder) as the index sees it in cactus_init
// (engine/corpus_embedder.h). The model lives as long as the process.
CorpusEmbedder model_embedder(const std::string& path, int threads) {
    static std::unique_ptr<TextEmbedder> model;
    model = TextEmbedder::load_encoder(path, threads);
    return corpus_embedder(*model);
}

struct Variant {
    std::string name;
    RankMode mode;
    FusionOptions fusion;
};

std::vector<Variant> variants() {
    std::vector<Variant> v = {{"bm25", RankMode::BM25, {}}, {"vector", RankMode::VECTOR, {}}};
    v.push_back(
        {"hybrid_cactus_0.8_0.2_top20_bm25_in_candidates", RankMode::HYBRID, FusionOptions::cactus_compatible()});
    for (size_t cand : {20, 100}) {
        for (double wv : {0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2}) {
            FusionOptions f{60.0, wv, 1.0 - wv, cand, false};
            char name[96];
            std::snprintf(name, sizeof(name), "hybrid_%.1f_%.1f_top%zu", wv, 1.0 - wv, cand);
            v.push_back({name, RankMode::HYBRID, f});
        }
    }
    return v;
}

nlohmann::json evaluate(CorpusIndex& index, const std::vector<Query>& queries,
                        const std::vector<std::vector<float>>& qvecs, const Variant& variant) {
    index.set_fusion(variant.fusion);
    double r1 = 0, r5 = 0, r10 = 0, mrr = 0, ndcg = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < queries.size(); ++i) {
        std::vector<RetrievedChunk> chunks = index.query_with_vector(queries[i].text, qvecs[i], 100, variant.mode);
        std::vector<std::string> files;  // ranked, first chunk of each file
        for (const RetrievedChunk& c : chunks) {
            if (std::find(files.begin(), files.end(), c.source) == files.end()) files.push_back(c.source);
        }
        auto it = std::find(files.begin(), files.end(), queries[i].answer);
        if (it == files.end()) continue;
        double rank = static_cast<double>(it - files.begin() + 1);
        r1 += rank <= 1, r5 += rank <= 5, r10 += rank <= 10;
        if (rank <= 10) mrr += 1.0 / rank, ndcg += 1.0 / std::log2(rank + 1.0);
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double n = static_cast<double>(queries.size());
    auto round4 = [](double x) { return std::round(x * 1e4) / 1e4; };
    return {{"ranking", variant.name},       {"recall@1", round4(r1 / n)}, {"recall@5", round4(r5 / n)},
            {"recall@10", round4(r10 / n)},  {"mrr@10", round4(mrr / n)},  {"ndcg@10", round4(ndcg / n)},
            {"ms_per_query", round4(ms / n)}};
}

}  // namespace

int main(int argc, char** argv) {
    std::unordered_map<std::string, std::string> args;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--fake") {
            args["fake"] = "1";
        } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
            args[a.substr(2)] = argv[++i];
        } else {
            std::cerr << "rag_eval: unexpected argument " << a << "\n";
            return 2;
        }
    }
    if (!args.count("corpus") || !args.count("queries") || (!args.count("model") && !args.count("fake"))) {
        std::cerr << "usage: rag_eval --corpus DIR --queries FILE (--model GGUF | --fake) [--threads N] "
                     "[--index-root DIR] [--limit N] [--label NAME] [--out ROWS.jsonl]\n";
        return 2;
    }
    try {
        CorpusEmbedder embedder =
            args.count("fake") ? fake_embedder()
                               : model_embedder(args["model"], args.count("threads") ? std::stoi(args["threads"]) : 0);
        CorpusOptions options;
        if (args.count("index-root")) options.index_root = args["index-root"];
        size_t limit = args.count("limit") ? std::stoul(args["limit"]) : SIZE_MAX;
        std::vector<Query> queries = read_queries(args["queries"], limit);
        auto index = CorpusIndex::open(args["corpus"], embedder, options);
        auto t0 = std::chrono::steady_clock::now();
        std::vector<std::string> texts;
        for (const Query& q : queries) texts.push_back(q.text);
        std::vector<std::vector<float>> qvecs = embedder.embed(texts);
        double query_embed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        nlohmann::json rows = nlohmann::json::array();
        for (const Variant& v : variants()) rows.push_back(evaluate(*index, queries, qvecs, v));
        const CorpusBuildStats& s = index->stats();
        nlohmann::json common = {
            {"bench", "rag_eval"},        {"corpus", args.count("label") ? args["label"] : args["corpus"]},
            {"embedder", embedder.id},    {"files", s.files},
            {"chunks", index->size()},    {"queries", queries.size()},
            {"from_cache", s.from_cache}, {"open_s", s.seconds_total},
            {"embed_s", s.seconds_embed}, {"query_embed_s", query_embed_s}};
        if (args.count("out")) {
            std::ofstream out(args["out"], std::ios::app);
            for (const nlohmann::json& r : rows) {
                nlohmann::json row = common;
                row.update(r);
                out << row.dump() << "\n";
            }
        }
        common["rankings"] = rows;
        std::cout << common.dump(1) << "\n";
    } catch (const std::exception& e) {
        std::cerr << "rag_eval: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
