// Threads and the C API: stop from another thread, serialized calls on one handle, concurrent
// handles, and every entry point on a thread with a 256 KiB stack.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/capi_fixture.h"

using cactus::testing::shared_model;
using cactus::testing::test_model_path;
using nlohmann::json;

namespace {

const char* kMessages = R"([{"role":"user","content":"Write a long story about a robot."}])";

struct StopProbe {
    cactus_model_t model;
    std::atomic<int> tokens{0};
    std::atomic<int> tokens_at_stop{-1};
};

void stop_after_five(const char*, uint32_t, void* user_data) {
    auto* probe = static_cast<StopProbe*>(user_data);
    if (++probe->tokens == 5) {
        std::thread([probe] {
            probe->tokens_at_stop = probe->tokens.load();
            cactus_stop(probe->model);
        }).join();
    }
}

}  // namespace

TEST(CApiThreads, StopFromAnotherThreadEndsWithinOneStep) {
    cactus_model_t model = shared_model("smollm2-135m");
    StopProbe probe{model};
    static char buffer[1 << 16];
    int rc = cactus_complete(model, kMessages, buffer, sizeof buffer,
                             R"({"max_tokens":200,"ignore_eos":true})", nullptr, stop_after_five, &probe,
                             nullptr, 0);
    ASSERT_GT(rc, 0) << cactus_get_last_error();
    json r = json::parse(buffer);
    EXPECT_EQ(r["finish_reason"], "cancelled");
    EXPECT_LE(r["decode_tokens"].get<int>(), probe.tokens_at_stop.load() + 1);
}

TEST(CApiThreads, CallsOnOneHandleFromManyThreadsAreSerialized) {
    cactus_model_t model = shared_model("smollm2-135m");
    std::vector<std::thread> threads;
    std::atomic<int> successes{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::vector<char> buffer(1 << 16);
            std::string messages = R"([{"role":"user","content":"Count to )" + std::to_string(t + 2) + R"("}])";
            int rc = cactus_complete(model, messages.c_str(), buffer.data(), buffer.size(),
                                     R"({"max_tokens":6})", nullptr, nullptr, nullptr, nullptr, 0);
            if (rc > 0 && json::parse(buffer.data())["success"] == true) ++successes;
            cactus_reset(model);
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(successes.load(), 4);
}

TEST(CApiThreads, DifferentHandlesRunConcurrentlyAndAgree) {
    std::string path = test_model_path("smollm2-135m");
    cactus_model_t a = cactus_init(path.c_str(), nullptr, false);
    cactus_model_t b = cactus_init(path.c_str(), nullptr, false);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    std::string ra, rb;
    auto run = [](cactus_model_t m, std::string* out) {
        std::vector<char> buffer(1 << 16);
        cactus_complete(m, R"([{"role":"user","content":"Name three colors."}])", buffer.data(), buffer.size(),
                        R"({"max_tokens":12,"temperature":0})", nullptr, nullptr, nullptr, nullptr, 0);
        *out = json::parse(buffer.data())["response"].get<std::string>();
    };
    std::thread ta(run, a, &ra), tb(run, b, &rb);
    ta.join();
    tb.join();
    EXPECT_FALSE(ra.empty());
    EXPECT_EQ(ra, rb);
    cactus_destroy(a);
    cactus_destroy(b);
}

namespace {

struct SmallStackRun {
    std::string path;
    bool ok = false;
    std::string error;
};

void* every_entry_point(void* arg) {
    auto* run = static_cast<SmallStackRun*>(arg);
    cactus_log_set_level(3);
    cactus_model_t m = cactus_init(run->path.c_str(), nullptr, false);
    if (m == nullptr) {
        run->error = cactus_get_last_error();
        return nullptr;
    }
    std::vector<char> buffer(1 << 16);
    const char* messages = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hello!"}])";
    int rendered = cactus_render_prompt(m, messages, nullptr, nullptr, buffer.data(), buffer.size());
    size_t n = 0;
    int tokenized = cactus_tokenize(m, "Hello world", nullptr, 0, &n);
    int prefilled = cactus_prefill(m, messages, buffer.data(), buffer.size(), nullptr, nullptr, nullptr, 0);
    int completed = cactus_complete(m, messages, buffer.data(), buffer.size(), R"({"max_tokens":8})", nullptr,
                                    nullptr, nullptr, nullptr, 0);
    std::string deep(50000, '[');
    int hostile = cactus_complete(m, deep.c_str(), buffer.data(), buffer.size(), nullptr, nullptr, nullptr,
                                  nullptr, nullptr, 0);
    cactus_stop(m);
    cactus_reset(m);
    cactus_destroy(m);
    run->ok = rendered > 0 && tokenized == 0 && n > 0 && prefilled > 0 && completed > 0 && hostile == -1;
    if (!run->ok) run->error = cactus_get_last_error();
    return nullptr;
}

}  // namespace

TEST(CApiThreads, EveryEntryPointWorksOnA256KiBStack) {
    for (const char* name : {"smollm2-135m", "gemma3-270m"}) {
        SmallStackRun run{test_model_path(name)};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        pthread_t thread;
        ASSERT_EQ(pthread_create(&thread, &attr, every_entry_point, &run), 0);
        pthread_join(thread, nullptr);
        pthread_attr_destroy(&attr);
        EXPECT_TRUE(run.ok) << name << ": " << run.error;
    }
}
