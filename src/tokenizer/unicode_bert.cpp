// Lookups over the generated BERT Unicode tables (unicode_bert_tables.cpp).
#include "tokenizer/unicode_bert.h"

#include <algorithm>

namespace cactus {
namespace bert_unicode {

namespace {

bool in_ranges(const CodepointRange* table, size_t count, uint32_t cp) {
    const CodepointRange* end = table + count;
    const CodepointRange* it =
        std::upper_bound(table, end, cp, [](uint32_t value, const CodepointRange& r) { return value < r.first; });
    return it != table && cp <= (it - 1)->last;
}

// Hangul syllables decompose algorithmically (Unicode 3.12): L V, or L V T.
constexpr uint32_t kHangulBase = 0xAC00, kHangulCount = 11172;
constexpr uint32_t kLeadBase = 0x1100, kVowelBase = 0x1161, kTrailBase = 0x11A7;
constexpr uint32_t kVowelCount = 21, kTrailCount = 28;

}  // namespace

bool is_whitespace(uint32_t cp) { return in_ranges(kWhitespace, kWhitespaceCount, cp); }

bool is_control(uint32_t cp) { return in_ranges(kControl, kControlCount, cp); }

bool is_punctuation(uint32_t cp) {
    // tokenizers' is_bert_punc adds char::is_ascii_punctuation: the ASCII symbols ($ + < = > ^ ` | ~)
    // that Unicode files under S*, not P*.
    if (cp < 0x80) {
        const bool alnum = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
        return cp > 0x20 && cp < 0x7F && !alnum;
    }
    return in_ranges(kPunctuation, kPunctuationCount, cp);
}

bool is_nonspacing_mark(uint32_t cp) { return in_ranges(kNonspacingMark, kNonspacingMarkCount, cp); }

bool is_cjk_ideograph(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

uint32_t to_lower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    const CaseRun* end = kLowercase + kLowercaseCount;
    const CaseRun* it =
        std::upper_bound(kLowercase, end, cp, [](uint32_t value, const CaseRun& r) { return value < r.first; });
    if (it == kLowercase) return cp;
    const CaseRun& run = *(it - 1);
    const uint32_t distance = cp - run.first;
    if (distance % run.stride != 0 || distance / run.stride >= run.count) return cp;
    return static_cast<uint32_t>(static_cast<int64_t>(cp) + run.delta);
}

void append_nfd(uint32_t cp, std::vector<uint32_t>& out) {
    if (cp < 0xC0) {  // nothing below U+00C0 decomposes
        out.push_back(cp);
        return;
    }
    if (cp >= kHangulBase && cp < kHangulBase + kHangulCount) {
        const uint32_t index = cp - kHangulBase;
        out.push_back(kLeadBase + index / (kVowelCount * kTrailCount));
        out.push_back(kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount);
        if (index % kTrailCount != 0) out.push_back(kTrailBase + index % kTrailCount);
        return;
    }
    const Decomposition* end = kDecompositions + kDecompositionsCount;
    const Decomposition* it =
        std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, uint32_t value) { return d.cp < value; });
    if (it == end || it->cp != cp) {
        out.push_back(cp);
        return;
    }
    out.insert(out.end(), kDecompositionPool + it->offset, kDecompositionPool + it->offset + it->length);
}

}  // namespace bert_unicode
}  // namespace cactus
