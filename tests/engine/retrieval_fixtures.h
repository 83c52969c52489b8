#pragma once
// Shared by the retrieval tests: a fake embedder (hashed bag of words, one token per word) and a
// temporary corpus folder with its own index root.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/retrieval/bm25.h"
#include "engine/retrieval/corpus_types.h"

namespace cactus::test {

inline size_t count_words(const std::string& s) {
    size_t n = 0;
    bool in_word = false;
    for (char c : s) {
        bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
        if (!space && !in_word) ++n;
        in_word = !space;
    }
    return n;
}

// Vectors of hashed term counts, unit length; `calls` counts embedded texts (to see reuse).
inline CorpusEmbedder fake_embedder(std::shared_ptr<size_t> calls, const std::string& id = "fake-bow-64",
                                    size_t dim = 64) {
    CorpusEmbedder e;
    e.id = id;
    e.dim = dim;
    e.count_tokens = count_words;
    e.embed = [calls, dim](const std::vector<std::string>& texts) {
        std::vector<std::vector<float>> out;
        for (const std::string& t : texts) {
            std::vector<float> v(dim, 0.0f);
            for (const std::string& term : bm25_terms(t)) v[std::hash<std::string>()(term) % dim] += 1.0f;
            double norm = 0;
            for (float x : v) norm += x * x;
            if (norm == 0) v[0] = 1.0f, norm = 1;
            for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
            out.push_back(v);
        }
        *calls += texts.size();
        return out;
    };
    return e;
}

// A fresh folder holding corpus/ and index/; removed at destruction. It lives in /dev/shm when
// there is one: the damaged-index tests rewrite the index hundreds of times, and ext4 flushes
// data on every rename over an existing file (auto_da_alloc), which is seconds on a busy disk.
class TempCorpus {
public:
    TempCorpus() {
        struct stat st;
        std::string tmpl = (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp");
        tmpl += "/cactus_rag_XXXXXX";
        root_ = mkdtemp(&tmpl[0]);
        mkdir(corpus().c_str(), 0755);
    }
    ~TempCorpus() { std::system(("rm -rf '" + root_ + "'").c_str()); }
    std::string corpus() const { return root_ + "/corpus"; }
    std::string index_root() const { return root_ + "/index"; }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(corpus() + "/" + name, std::ios::binary) << text;
    }
    void remove(const std::string& name) const { std::remove((corpus() + "/" + name).c_str()); }

private:
    std::string root_;
};

}  // namespace cactus::test
