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
    int rc = cactus_complete(model, kMessages, buffer, sizeof buffer, R"({"max_tokens":200,"ignore_eos":true})",
                             nullptr, stop_after_five, &probe, nullptr, 0);
    ASSERT_GT(rc, 0) << cactus_get_last_error();
    json r = json::parse(buffer);
    EXPECT_EQ(r["finish_reason"], "cancelled");
    EXPECT_LE(r["decode_tokens"].get<int>(), probe.tokens_at_stop.load() + 1);
}

namespace {

void record_token(const char*, uint32_t id, void* user) { static_cast<std::vector<uint32_t>*>(user)->push_back(id); }

// Greedy completion of "Count to n": the generated token ids (via the callback) and the response.
std::vector<uint32_t> greedy_tokens(cactus_model_t model, int n, json* response = nullptr) {
    std::vector<char> buffer(1 << 16);
    std::vector<uint32_t> tokens;
    std::string messages = R"([{"role":"user","content":"Count to )" + std::to_string(n) + R"("}])";
    int rc = cactus_complete(model, messages.c_str(), buffer.data(), buffer.size(),
                             R"({"max_tokens":8,"temperature":0,"ignore_eos":true})", nullptr, record_token, &tokens,
                             nullptr, 0);
    if (rc <= 0) ADD_FAILURE() << cactus_get_last_error();
    if (response != nullptr) *response = json::parse(buffer.data(), nullptr, false);
    return tokens;
}

}  // namespace

TEST(CApiThreads, CallsOnOneHandleFromManyThreadsAreSerializedAndMatchTheSerialRun) {
    cactus_model_t model = shared_model("smollm2-135m");
    const int kThreads = 4;
    std::vector<std::vector<uint32_t>> serial(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        cactus_reset(model);
        serial[t] = greedy_tokens(model, t + 2);
        ASSERT_EQ(serial[t].size(), 8u);
    }
    std::vector<std::vector<uint32_t>> concurrent(kThreads);
    std::vector<json> responses(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            concurrent[t] = greedy_tokens(model, t + 2, &responses[t]);
            cactus_reset(model);
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(responses[t]["success"], true) << "thread " << t;
        EXPECT_EQ(concurrent[t], serial[t]) << "thread " << t << ": the concurrent result differs from the serial one";
    }
}

TEST(CApiThreads, DifferentHandlesRunConcurrentlyAndMatchTheSerialRun) {
    std::string path = test_model_path("smollm2-135m");
    cactus_model_t a = cactus_init(path.c_str(), nullptr, false);
    cactus_model_t b = cactus_init(path.c_str(), nullptr, false);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    const std::vector<uint32_t> serial_a = greedy_tokens(a, 5), serial_b = greedy_tokens(b, 7);
    cactus_reset(a);
    cactus_reset(b);
    std::vector<uint32_t> ta_tokens, tb_tokens;
    std::thread ta([&] { ta_tokens = greedy_tokens(a, 5); });
    std::thread tb([&] { tb_tokens = greedy_tokens(b, 7); });
    ta.join();
    tb.join();
    EXPECT_EQ(serial_a.size(), 8u);
    EXPECT_EQ(ta_tokens, serial_a);
    EXPECT_EQ(tb_tokens, serial_b);
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
    int completed = cactus_complete(m, messages, buffer.data(), buffer.size(), R"({"max_tokens":8})", nullptr, nullptr,
                                    nullptr, nullptr, 0);
    std::string deep(50000, '[');
    int hostile =
        cactus_complete(m, deep.c_str(), buffer.data(), buffer.size(), nullptr, nullptr, nullptr, nullptr, nullptr, 0);
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
