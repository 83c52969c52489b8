#include "tokenizer/flat_index.h"

#include <functional>

#include "core/error.h"

namespace cactus {

namespace {

// Power of two with load factor <= 1/2.
size_t table_size(size_t n) {
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

uint64_t mix(uint64_t key) {  // splitmix64's finaliser: every key bit reaches the low bits
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebULL;
    return key ^ (key >> 31);
}

uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

int32_t TextIndex::build(const std::vector<std::string>& texts) {
    texts_ = &texts;
    slots_.assign(table_size(texts.size()), Slot{0, -1});
    mask_ = slots_.size() - 1;
    for (size_t id = 0; id < texts.size(); ++id) {
        const size_t hash = std::hash<std::string_view>()(texts[id]);
        size_t i = hash & mask_;
        while (slots_[i].id >= 0) {
            const Slot& slot = slots_[i];
            if (slot.hash == static_cast<uint32_t>(hash) && texts[static_cast<size_t>(slot.id)] == texts[id]) {
                return static_cast<int32_t>(id);
            }
            i = (i + 1) & mask_;
        }
        slots_[i] = Slot{static_cast<uint32_t>(hash), static_cast<int32_t>(id)};
    }
    return -1;
}

int32_t TextIndex::find(std::string_view text) const {
    if (slots_.empty()) return -1;
    const size_t hash = std::hash<std::string_view>()(text);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
        const Slot& slot = slots_[i];
        if (slot.id < 0) return -1;
        if (slot.hash == static_cast<uint32_t>(hash) && (*texts_)[static_cast<size_t>(slot.id)] == text) return slot.id;
    }
}

void PairIndex::reserve(size_t n) {
    if (size_ != 0) fail("PairIndex::reserve: the index is not empty");
    slots_.assign(table_size(n), Entry{0, -1});
    mask_ = slots_.size() - 1;
}

void PairIndex::insert(int32_t left, int32_t right, int32_t rank) {
    if (rank < 0) fail("PairIndex::insert: rank %d is negative", rank);
    if (2 * (size_ + 1) > slots_.size()) {  // grow: re-insert into a table twice the size
        std::vector<Entry> old = std::move(slots_);
        slots_.assign(table_size(size_ + 1), Entry{0, -1});
        mask_ = slots_.size() - 1;
        size_ = 0;
        for (const Entry& e : old) {
            if (e.rank >= 0) insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key), e.rank);
        }
    }
    const uint64_t key = pair_key(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
        Entry& slot = slots_[i];
        if (slot.rank < 0) {
            slot = Entry{key, rank};
            ++size_;
            return;
        }
        if (slot.key == key) return;  // the first (lowest) rank stays
    }
}

int32_t PairIndex::find(int32_t left, int32_t right) const {
    if (slots_.empty()) return -1;
    const uint64_t key = pair_key(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
        const Entry& slot = slots_[i];
        if (slot.rank < 0 || slot.key == key) return slot.rank;
    }
}

}  // namespace cactus
