#pragma once
// Minimal printf-style formatting into std::string.
#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>

namespace cactus {

std::string vformat(const char* fmt, va_list args);

inline std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string out = vformat(fmt, args);
    va_end(args);
    return out;
}

}  // namespace cactus
