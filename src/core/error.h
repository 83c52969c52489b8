#pragma once
// Errors inside the engine: recoverable conditions throw cactus::Error with a message that names
// the function and the bad value; the C API catches them. Invariants use CACTUS_ASSERT (always on).
#include <stdexcept>
#include <string>

#include "core/format.h"

namespace cactus {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] inline void fail(const char* message) { throw Error(message); }

template <typename... Args>
[[noreturn]] void fail(const char* fmt, Args&&... args) {
    throw Error(format(fmt, std::forward<Args>(args)...));
}

[[noreturn]] void assert_failed(const char* expr, const char* file, int line);

}  // namespace cactus

#define CACTUS_ASSERT(cond)                                              \
    do {                                                                 \
        if (!(cond)) ::cactus::assert_failed(#cond, __FILE__, __LINE__); \
    } while (0)
