#include "core/error.h"

#include <vector>

namespace cactus {

std::string vformat(const char* fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int needed = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (needed <= 0) return std::string();
    std::string out(static_cast<size_t>(needed), '\0');
    std::vsnprintf(out.data(), out.size() + 1, fmt, args);
    return out;
}

void assert_failed(const char* expr, const char* file, int line) {
    throw Error(format("internal error: assertion '%s' failed at %s:%d", expr, file, line));
}

}  // namespace cactus
