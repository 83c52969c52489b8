#pragma once
// Open-addressing hash tables for the tokenizer's hot lookups: one flat array with linear
// probing and no allocation per entry. A 262,144-token vocabulary with 514,906 merges (gemma4)
// fills them in tens of milliseconds, where node-based std::unordered_map spent most of the load
// time chasing bucket chains (tests/tokenizer/test_tokenizer_gemma4.py times the load).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cactus {

// Token text -> id, over texts the caller owns (they must outlive the index and not move).
class TextIndex {
public:
    // Indexes texts[0..n); returns -1, or the id of the first text equal to an earlier one.
    int32_t build(const std::vector<std::string>& texts);
    int32_t find(std::string_view text) const;  // -1 when absent
    // The earlier id of the duplicate build() reported.
    int32_t first_of(int32_t duplicate) const { return find((*texts_)[static_cast<size_t>(duplicate)]); }

private:
    struct Slot {
        uint32_t hash;  // low bits of the text's hash, checked before the texts are compared
        int32_t id;     // -1: empty
    };
    const std::vector<std::string>* texts_ = nullptr;
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

// (left id, right id) -> a BPE merge's rank.
class PairIndex {
public:
    void reserve(size_t n);
    // Keeps the first rank of a pair (the lowest, as merges are read in order).
    void insert(int32_t left, int32_t right, int32_t rank);
    int32_t find(int32_t left, int32_t right) const;  // -1 when absent

private:
    struct Entry {
        uint64_t key;  // left << 32 | right
        int32_t rank;  // -1: empty slot
    };
    std::vector<Entry> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace cactus
