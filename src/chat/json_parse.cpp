#include "chat/json_parse.h"

#include <utility>
#include <vector>

#include "core/error.h"

namespace cactus {

namespace {

// Deepest bracket nesting outside strings; stops counting once past the limit. Exact for valid
// JSON; for invalid text the parser reports the syntax error afterwards.
int bracket_depth(const char* begin, const char* end) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (const char* p = begin; p < end; ++p) {
        const char c = *p;
        if (in_string) {
            if (c == '\\')
                ++p;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > deepest) deepest = depth;
            if (deepest > kMaxJsonDepth) return deepest;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

template <typename Json>
void check_depth(const Json& root, const char* what) {
    std::vector<std::pair<const Json*, int>> stack = {{&root, 0}};
    while (!stack.empty()) {
        const Json* j = stack.back().first;
        const int depth = stack.back().second;
        stack.pop_back();
        if (!j->is_structured()) continue;
        if (depth + 1 > kMaxJsonDepth) {
            fail("%s is nested deeper than %d levels (kMaxJsonDepth)", what, kMaxJsonDepth);
        }
        for (const Json& child : *j) stack.emplace_back(&child, depth + 1);
    }
}

}  // namespace

nlohmann::ordered_json parse_json(const char* begin, const char* end, const char* what) {
    const size_t bytes = static_cast<size_t>(end - begin);
    if (bytes > kMaxJsonBytes) {
        fail("%s has %zu bytes, more than %zu (kMaxJsonBytes)", what, bytes, kMaxJsonBytes);
    }
    if (bracket_depth(begin, end) > kMaxJsonDepth) {
        fail("%s is nested deeper than %d levels (kMaxJsonDepth)", what, kMaxJsonDepth);
    }
    try {
        return nlohmann::ordered_json::parse(begin, end);
    } catch (const nlohmann::ordered_json::exception& e) {
        fail("%s is not valid JSON: %s", what, e.what());
    }
}

bool try_parse_json(const char* begin, const char* end, nlohmann::ordered_json& out) {
    if (static_cast<size_t>(end - begin) > kMaxJsonBytes || bracket_depth(begin, end) > kMaxJsonDepth) return false;
    nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(begin, end, nullptr, false);
    if (parsed.is_discarded()) return false;
    out = std::move(parsed);
    return true;
}

void check_json_depth(const nlohmann::ordered_json& j, const char* what) { check_depth(j, what); }
void check_json_depth(const nlohmann::json& j, const char* what) { check_depth(j, what); }

}  // namespace cactus
