#pragma once
// Runs a test body on a thread with a 256 KiB stack, as the engine's worker threads have: parsers
// and evaluators must bound their recursion to pass. AddressSanitizer pads every stack frame with
// redzones (frames grow several-fold), so sanitizer builds give the same depth 16x the room.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cstddef>
#include <functional>

namespace cactus::testing {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's spelling of gcc's __SANITIZE_ADDRESS__
#define CACTUS_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(CACTUS_TEST_ASAN)
constexpr size_t kStackScale = 16;
#else
constexpr size_t kStackScale = 1;
#endif

inline void on_small_stack(const std::function<void()>& fn) {
    struct Box {
        const std::function<void()>* fn;
    } box{&fn};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024 * kStackScale);
    pthread_t thread;
    ASSERT_EQ(pthread_create(
                  &thread, &attr,
                  [](void* p) -> void* {
                      (*static_cast<Box*>(p)->fn)();
                      return nullptr;
                  },
                  &box),
              0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
}

}  // namespace cactus::testing
