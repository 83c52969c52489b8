#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace cactus {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Warning)};
std::mutex g_callback_mutex;
LogCallback g_callback = nullptr;
void* g_user_data = nullptr;
const char* kNames[] = {"debug", "info", "warning", "error"};
}  // namespace

void log_set_level(int level) {
    if (level < 0) level = 0;
    if (level > 4) level = 4;
    g_level.store(level);
}

void log_set_callback(LogCallback callback, void* user_data) {
    std::lock_guard<std::mutex> lock(g_callback_mutex);
    g_callback = callback;
    g_user_data = user_data;
}

bool log_enabled(LogLevel level) { return level != LogLevel::None && static_cast<int>(level) >= g_level.load(); }

void log_message(LogLevel level, const std::string& message) {
    int l = static_cast<int>(level);
    std::lock_guard<std::mutex> lock(g_callback_mutex);
    if (g_callback != nullptr) {
        g_callback(l, message.c_str(), g_user_data);
    } else {
        std::fprintf(stderr, "cactus %s: %s\n", kNames[l], message.c_str());
    }
}

}  // namespace cactus
