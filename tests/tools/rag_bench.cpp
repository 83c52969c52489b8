// Build and query cost of CorpusIndex at 10^4 and 10^5 chunks, embedding excluded: synthetic
// notes (paragraphs of ~100 Zipf-distributed words, one chunk each) and random unit vectors.
//   rag_bench [--chunks N[,N...]] [--dim D] [--queries Q] [--search-threads T] [--dir TMPDIR]
//             [--out ROWS.jsonl]
// Prints a JSON row per size: open (build) seconds without the embedder's time, the cached
// reopen, index bytes, and ms per query for vector, bm25 and hybrid (query vector given).
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/retrieval/corpus_index.h"

namespace {

using namespace cactus;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<float> random_unit(std::mt19937_64& rng, size_t dim) {
    std::normal_distribution<float> normal;
    std::vector<float> v(dim);
    double norm = 0;
    for (float& x : v) x = normal(rng), norm += double(x) * x;
    for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
    return v;
}

// Words w0..w4999 with Zipf-like frequencies (index ~ exp of a uniform draw).
std::string word(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(0.0, std::log(5000.0));
    return "w" + std::to_string(static_cast<int>(std::exp(u(rng))) - 1);
}

void write_corpus(const std::string& dir, size_t n_chunks) {
    std::mt19937_64 rng(42);
    const size_t per_file = 100;
    for (size_t f = 0; f * per_file < n_chunks; ++f) {
        char name[64];
        std::snprintf(name, sizeof(name), "/note%06zu.txt", f);
        std::ofstream out(dir + name);
        for (size_t p = 0; p < per_file && f * per_file + p < n_chunks; ++p) {
            for (size_t w = 0; w < 100; ++w) out << (w ? " " : "") << word(rng);
            out << "\n\n";
        }
    }
}

nlohmann::json run(size_t n_chunks, size_t dim, size_t n_queries, const std::string& tmp, size_t search_threads) {
    std::string root = tmp + "/rag_bench_" + std::to_string(n_chunks);
    std::system(("rm -rf '" + root + "' && mkdir -p '" + root + "/corpus'").c_str());
    write_corpus(root + "/corpus", n_chunks);
    CorpusEmbedder e;
    e.id = "random-unit";
    e.dim = dim;
    e.count_tokens = [](const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), ' ') + 1); };
    auto rng = std::make_shared<std::mt19937_64>(7);
    e.embed = [rng, dim](const std::vector<std::string>& texts) {
        std::vector<std::vector<float>> out;
        for (size_t i = 0; i < texts.size(); ++i) out.push_back(random_unit(*rng, dim));
        return out;
    };
    CorpusOptions options;
    options.index_root = root + "/index";
    options.embed_batch = 256;
    options.search_threads = search_threads;
    auto index = CorpusIndex::open(root + "/corpus", e, options);
    const CorpusBuildStats built = index->stats();
    auto reopened = CorpusIndex::open(root + "/corpus", e, options);
    struct stat st;
    stat((built.index_dir + "/chunks.bin").c_str(), &st);

    std::mt19937_64 qrng(9);
    nlohmann::json row = {{"bench", "rag_bench"},
                          {"chunks", index->size()},
                          {"dim", dim},
                          {"search_threads", search_threads},
                          {"build_s_excl_embed", built.seconds_total - built.seconds_embed},
                          {"embed_s_fake", built.seconds_embed},
                          {"reopen_cached_s", reopened->stats().seconds_total},
                          {"reopen_from_cache", reopened->stats().from_cache},
                          {"chunks_bin_bytes", static_cast<uint64_t>(st.st_size)}};
    for (RankMode mode : {RankMode::VECTOR, RankMode::BM25, RankMode::HYBRID}) {
        double total = 0;
        for (size_t q = 0; q < n_queries; ++q) {
            std::vector<float> v = random_unit(qrng, dim);
            std::string text = word(qrng) + " " + word(qrng) + " " + word(qrng) + " " + word(qrng);
            auto t0 = Clock::now();
            auto r = index->query_with_vector(text, v, 5, mode);
            total += since(t0);
        }
        row[std::string("query_ms_") + rank_mode_name(mode)] = 1e3 * total / static_cast<double>(n_queries);
    }
    std::system(("rm -rf '" + root + "'").c_str());
    // The machine's load, so rows from a shared box can be told apart from quiet ones.
    std::ifstream load("/proc/loadavg");
    double load1 = 0;
    if (load >> load1) row["loadavg_1min"] = load1;
    row["hw_threads"] = std::thread::hardware_concurrency();
    return row;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<size_t> sizes = {10000, 100000};
    size_t dim = 384, n_queries = 50, search_threads = 0;
    std::string tmp = "/tmp", out_path;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i], v = argv[i + 1];
        if (a == "--chunks") {
            sizes.clear();
            std::stringstream ss(v);
            for (std::string s; std::getline(ss, s, ',');) sizes.push_back(std::stoul(s));
        } else if (a == "--dim") {
            dim = std::stoul(v);
        } else if (a == "--queries") {
            n_queries = std::stoul(v);
        } else if (a == "--search-threads") {
            search_threads = std::stoul(v);
        } else if (a == "--dir") {
            tmp = v;
        } else if (a == "--out") {
            out_path = v;
        }
    }
    try {
        for (size_t n : sizes) {
            nlohmann::json row = run(n, dim, n_queries, tmp, search_threads);
            std::cout << row.dump() << std::endl;
            if (!out_path.empty()) std::ofstream(out_path, std::ios::app) << row.dump() << "\n";
        }
    } catch (const std::exception& e) {
        std::cerr << "rag_bench: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
