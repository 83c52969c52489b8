// Handle lifecycle rules of the C API (include/cactus/cactus.h, "Threads and handles"):
// - a cactus_stop applies to every call that entered before it, wherever that call is: waiting
//   for the handle, rendering, prefilling (checked between chunks) or decoding (every token);
//   never to a call that enters later;
// - cactus_destroy ends the call in flight, waits for it, and makes queued and later callers
//   fail cleanly (no use after free);
// - a call from inside a token callback into the same handle fails at once (no deadlock).
// Threads are sequenced with flags; the short sleeps only let a thread reach its wait.
#include <gtest/gtest.h>

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

const char* kStory = R"([{"role":"user","content":"Write a long story about a robot."}])";
const char* kLong = R"({"max_tokens":64,"ignore_eos":true,"temperature":0})";

struct Outcome {
    int rc = 0;
    json response;
    std::string error;
};

Outcome complete(cactus_model_t model, const char* messages, const char* options,
                 cactus_token_callback callback = nullptr, void* user = nullptr) {
    std::vector<char> buffer(1 << 16);
    Outcome o;
    o.rc = cactus_complete(model, messages, buffer.data(), buffer.size(), options, nullptr, callback, user, nullptr, 0);
    o.error = cactus_get_last_error();
    o.response = json::parse(buffer.data(), nullptr, false);
    return o;
}

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Holds the call in flight inside its first token callback until released.
struct Gate {
    std::atomic<bool> entered{false};
    std::atomic<bool> release{false};
};

void hold_at_first_token(const char*, uint32_t, void* user) {
    auto* gate = static_cast<Gate*>(user);
    if (gate->entered.exchange(true)) return;
    while (!gate->release.load()) pause_ms(1);
}

void wait_for(const std::atomic<bool>& flag) {
    while (!flag.load()) pause_ms(1);
}

std::string long_prompt_messages(int words) {
    std::string text;
    for (int k = 0; k < words; ++k) text += "word" + std::to_string(k % 97) + " ";
    return json::array({{{"role", "user"}, {"content", text}}}).dump();
}

}  // namespace

TEST(CApiLifecycle, StopSentWhileACallWaitsForTheHandleEndsThatCall) {
    cactus_model_t model = shared_model("smollm2-135m");
    cactus_reset(model);
    Gate gate;
    Outcome a, b;
    std::thread ta([&] { a = complete(model, kStory, kLong, hold_at_first_token, &gate); });
    wait_for(gate.entered);
    std::thread tb([&] { b = complete(model, kStory, kLong); });
    pause_ms(300);  // b is now waiting for the handle
    cactus_stop(model);
    gate.release = true;
    ta.join();
    tb.join();
    ASSERT_GT(a.rc, 0) << a.error;
    ASSERT_GT(b.rc, 0) << b.error;
    EXPECT_EQ(a.response["finish_reason"], "cancelled");
    EXPECT_EQ(b.response["finish_reason"], "cancelled");
    EXPECT_EQ(b.response["decode_tokens"], 0);
    // A stop never reaches a call that enters after it.
    Outcome c = complete(model, kStory, R"({"max_tokens":4,"ignore_eos":true})");
    ASSERT_GT(c.rc, 0) << c.error;
    EXPECT_EQ(c.response["finish_reason"], "length");
    EXPECT_EQ(c.response["decode_tokens"], 4);
}

TEST(CApiLifecycle, StopDuringPrefillEndsItBetweenChunks) {
    cactus_model_t model = shared_model("smollm2-135m");
    const std::string messages = long_prompt_messages(900);
    const char* options = R"({"max_tokens":8,"prefill_chunk":16})";
    for (bool use_prefill : {true, false}) {
        cactus_reset(model);
        std::atomic<bool> done{false};
        Outcome o;
        std::vector<char> buffer(1 << 16);
        std::thread t([&] {
            if (use_prefill) {
                o.rc =
                    cactus_prefill(model, messages.c_str(), buffer.data(), buffer.size(), options, nullptr, nullptr, 0);
                o.error = cactus_get_last_error();
            } else {
                o = complete(model, messages.c_str(), options);
            }
            done = true;
        });
        pause_ms(300);
        ASSERT_FALSE(done.load()) << "the prefill finished before the stop; use a longer prompt";
        cactus_stop(model);
        t.join();
        if (use_prefill) {
            EXPECT_EQ(o.rc, CACTUS_ERROR);
            EXPECT_NE(o.error.find("stopped by cactus_stop"), std::string::npos) << o.error;
        } else {
            ASSERT_GT(o.rc, 0) << o.error;
            EXPECT_EQ(o.response["finish_reason"], "cancelled");
            EXPECT_EQ(o.response["decode_tokens"], 0);
            EXPECT_LT(o.response["prefill_tokens"].get<int>(), o.response["prompt_tokens"].get<int>());
        }
    }
}

TEST(CApiLifecycle, DestroyEndsTheCallInFlightAndQueuedCallersFailCleanly) {
    cactus_model_t model = cactus_init(test_model_path("smollm2-135m").c_str(), nullptr, false);
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    Gate gate;
    Outcome a, b, c;
    std::atomic<bool> destroyed{false};
    std::thread ta([&] { a = complete(model, kStory, kLong, hold_at_first_token, &gate); });
    wait_for(gate.entered);
    std::thread tb([&] { b = complete(model, kStory, kLong); });
    std::thread tc([&] {
        size_t n = 0;
        c.rc = cactus_tokenize(model, "hello", nullptr, 0, &n);
        c.error = cactus_get_last_error();
    });
    pause_ms(300);  // b and c wait for the handle
    std::thread td([&] {
        cactus_destroy(model);
        destroyed = true;
    });
    pause_ms(300);
    EXPECT_FALSE(destroyed.load()) << "destroy must wait for the call in flight";
    gate.release = true;
    for (std::thread* t : {&ta, &tb, &tc, &td}) t->join();
    ASSERT_GT(a.rc, 0) << a.error;
    EXPECT_EQ(a.response["finish_reason"], "cancelled");
    EXPECT_EQ(b.rc, CACTUS_ERROR);
    EXPECT_NE(b.error.find("destroyed"), std::string::npos) << b.error;
    EXPECT_EQ(c.rc, CACTUS_ERROR);
    EXPECT_NE(c.error.find("destroyed"), std::string::npos) << c.error;
    // Later callers with the stale handle get an error, not a use after free.
    Outcome later = complete(model, kStory, kLong);
    EXPECT_EQ(later.rc, CACTUS_ERROR);
    EXPECT_NE(later.error.find("not valid"), std::string::npos) << later.error;
    cactus_stop(model);
    cactus_reset(model);
    cactus_destroy(model);
}

namespace {

struct Reentry {
    cactus_model_t model = nullptr;
    int calls = 0;
    int tokenize_rc = 0;
    std::string tokenize_error;
    bool destroy_inside = false;
};

void call_back_into_handle(const char*, uint32_t, void* user) {
    auto* r = static_cast<Reentry*>(user);
    if (++r->calls != 2) return;
    size_t n = 0;
    r->tokenize_rc = cactus_tokenize(r->model, "hello", nullptr, 0, &n);
    r->tokenize_error = cactus_get_last_error();
    if (r->destroy_inside) cactus_destroy(r->model);
}

}  // namespace

TEST(CApiLifecycle, CallFromATokenCallbackIntoTheSameHandleFailsAtOnce) {
    cactus_model_t model = shared_model("smollm2-135m");
    Reentry r;
    r.model = model;
    Outcome o = complete(model, kStory, R"({"max_tokens":6,"ignore_eos":true})", call_back_into_handle, &r);
    ASSERT_GT(o.rc, 0) << o.error;
    EXPECT_EQ(o.response["decode_tokens"], 6);  // the outer call goes on
    EXPECT_EQ(r.tokenize_rc, CACTUS_ERROR);
    EXPECT_NE(r.tokenize_error.find("callback"), std::string::npos) << r.tokenize_error;
}

TEST(CApiLifecycle, DestroyFromATokenCallbackReturnsAndTheCallEnds) {
    cactus_model_t model = cactus_init(test_model_path("smollm2-135m").c_str(), nullptr, false);
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    Reentry r;
    r.model = model;
    r.destroy_inside = true;
    Outcome o = complete(model, kStory, kLong, call_back_into_handle, &r);
    ASSERT_GT(o.rc, 0) << o.error;
    EXPECT_EQ(o.response["finish_reason"], "cancelled");
    EXPECT_LE(o.response["decode_tokens"].get<int>(), 3);
    size_t n = 0;
    EXPECT_EQ(cactus_tokenize(model, "hello", nullptr, 0, &n), CACTUS_ERROR);
    EXPECT_NE(std::string(cactus_get_last_error()).find("not valid"), std::string::npos);
}

// ignore_eos runs to max_tokens, except where a grammar has ended: no token may follow it, so the
// reply stops there instead of failing with "the grammar allows no next token".
TEST(CApiLifecycle, IgnoreEosStopsWhereTheGrammarEnds) {
    cactus_model_t model = shared_model("smollm2-135m");
    cactus_reset(model);
    const char* options =
        R"({"max_tokens":64,"ignore_eos":true,"temperature":0,"response_format":{"type":"json_schema",)"
        R"("json_schema":{"name":"yes_no","schema":{"type":"string","enum":["yes","no"]}}}})";
    Outcome o = complete(model, R"([{"role":"user","content":"Is water wet?"}])", options);
    ASSERT_GT(o.rc, 0) << o.error;
    EXPECT_TRUE(o.response["success"].get<bool>()) << o.response.dump();
    EXPECT_EQ(o.response["finish_reason"], "stop");
    const std::string reply = o.response["response"].get<std::string>();
    EXPECT_TRUE(reply == "\"yes\"" || reply == "\"no\"") << reply;
}
