#pragma once
// Process-wide logging with a level and an optional callback (set through the C API).
#include "core/format.h"

namespace cactus {

enum class LogLevel : int { Debug = 0, Info = 1, Warning = 2, Error = 3, None = 4 };

using LogCallback = void (*)(int level, const char* message, void* user_data);

void log_set_level(int level);
void log_set_callback(LogCallback callback, void* user_data);
bool log_enabled(LogLevel level);
void log_message(LogLevel level, const std::string& message);  // to the callback, else stderr

}  // namespace cactus

#define CACTUS_LOG(level, ...)                                                                         \
    do {                                                                                               \
        if (::cactus::log_enabled(level)) ::cactus::log_message(level, ::cactus::format(__VA_ARGS__)); \
    } while (0)
#define CACTUS_LOG_DEBUG(...) CACTUS_LOG(::cactus::LogLevel::Debug, __VA_ARGS__)
#define CACTUS_LOG_INFO(...) CACTUS_LOG(::cactus::LogLevel::Info, __VA_ARGS__)
#define CACTUS_LOG_WARN(...) CACTUS_LOG(::cactus::LogLevel::Warning, __VA_ARGS__)
#define CACTUS_LOG_ERROR(...) CACTUS_LOG(::cactus::LogLevel::Error, __VA_ARGS__)
