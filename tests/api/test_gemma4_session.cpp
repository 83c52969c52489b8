// The Gemma 4 session of the founding crash report (Gemma-4-E2B, a two-turn session with 20 tools,
// thinking on and KeyDiff compaction, called from an app's thread), through the C API on the
// reduced random-weight file (scripts/make_gemma4_gguf.py --shape reduced: the E2B structure with
// KV sharing, per-layer embeddings, a 64-token window and the real vocabulary and template), run
// from a thread with a 256 KiB stack: turn 1 forces a call; the app answers with the assistant
// message (OpenAI tool_calls with ids, arguments as objects) and one role:tool result per call;
// turn 2 runs under the lazy grammar (the prompt opens the thought); a new user message; turn 3.
// Once with compaction on (int8 KV, compacted in the prefill of each full prompt, rings wrapping
// ~44 times), then again on the same handle with compaction off. Every reply is valid JSON with
// success true; no marker reaches `response` or the stream; every call names an offered tool and its
// arguments satisfy the tool's schema; compaction happened (kv_compactions); a turn reuses the
// cached prefix whenever the rings can roll back over the previous reply.
// python/tests/gemma4_session.py runs the same session from a Python thread (the same tools and
// rules); random weights: why strings are bounded and a thought-only turn 1 is asked again is there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/schema_check.h"
#include "cactus/cactus.h"
#include "common/small_stack.h"
#include "common/test_models.h"
#include "gguf/gguf.h"

namespace {

using json = nlohmann::ordered_json;
using cactus::testing::on_small_stack;
using cactus::testing::schema_problem;
using cactus::testing::test_model_path;

const char* const kMarkers[] = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|\"|>", "<turn|>"};
constexpr int kMaxTries = 64;          // forced turn 1: seeds tried while the reply only thinks
constexpr size_t kForcedTokens = 384;  // room for several calls (a random model chains 1-5)
constexpr size_t kLazyTokens = 48;     // short, so the sliding rings can roll back over the reply
constexpr size_t kPrefillChunk = 512;  // the default; a ring rolls back min(window, chunk) tokens
constexpr uint64_t kSeed = 3;          // python/tests/gemma4_session.py uses 7

const char* kSystem =
    "You are the assistant on the user's phone. Use the tools to act for the user; confirm what you did in one "
    "or two sentences.";
const char* kUser1 =
    "I'm taking my parents to dinner tonight. Reserve a table for 4 at Luigi's at 19:30, text my sister at "
    "+4915112345678 that I'm running late, and check the weather in Berlin.";
const char* kUser3 =
    "Thanks. Also put 'buy flowers' on my todo list with high priority, and what is 17 * 23 + 4? After that, "
    "play some jazz at volume 30 in the living room.";

json load_tools() {
    std::ifstream in(std::string(CACTUS_SOURCE_DIR) + "/tests/api/data/gemma4_session_tools.json");
    std::stringstream text;
    text << in.rdbuf();
    return json::parse(text.str());
}

// Compaction on: a 2048-token context compacted at 2048 rows down to 512, int8 KV; the ~2,800-token
// prompt compacts once in a full prefill and the next compaction would come 1,536 tokens later,
// never inside the session's decodes, so the reuse rule below is exact. Off: f16, room for all.
json options(bool compaction, uint64_t seed, size_t max_tokens, bool force) {
    json o = {{"max_tokens", max_tokens},
              {"temperature", 0.8},
              {"top_k", 40},
              {"seed", seed},
              {"tool_rag_top_k", 0},
              {"enable_thinking_if_supported", true},
              {"auto_handoff", false},
              {"force_tools", force}};
    if (compaction) {
        o.update({{"n_ctx", 2048},
                  {"kv_compress", true},
                  {"kv_compress_at", 2048},
                  {"kv_compress_to", 512},
                  {"kv_cache_type", "int8"}});
    } else {
        o.update({{"n_ctx", 4096}, {"kv_compress", false}, {"kv_cache_type", "f16"}});
    }
    return o;
}

struct Turn {
    std::string name;
    int rc = 0;
    std::string error;  // cactus_get_last_error() when rc <= 0
    json response;      // discarded when the buffer does not hold JSON
    std::string streamed;
    int tries = 1;
};

Turn complete(cactus_model_t model, const std::string& name, const json& messages, const json& tools,
              const json& opts) {
    Turn t;
    t.name = name;
    std::vector<char> buffer(1 << 20);
    auto on_token = [](const char* piece, uint32_t, void* user) { *static_cast<std::string*>(user) += piece; };
    t.rc = cactus_complete(model, messages.dump().c_str(), buffer.data(), buffer.size(), opts.dump().c_str(),
                           tools.dump().c_str(), on_token, &t.streamed, nullptr, 0);
    if (t.rc <= 0) t.error = cactus_get_last_error();
    t.response = json::parse(buffer.data(), nullptr, false);
    return t;
}

bool usable(const Turn& t) { return t.rc > 0 && t.response.is_object() && t.response.value("success", false); }

// The assistant message with the reply's calls (ids, arguments as objects) and one role:tool
// result per call, which names the call and echoes its first argument, as an app's tool would.
void answer_calls(json& messages, const json& reply, int turn) {
    json message = {{"role", "assistant"}, {"content", reply["response"]}};
    json calls = json::array();
    for (size_t i = 0; i < reply["function_calls"].size(); ++i) {
        const json& c = reply["function_calls"][i];
        calls.push_back({{"id", "call_" + std::to_string(turn) + "_" + std::to_string(i)},
                         {"type", "function"},
                         {"function", {{"name", c["name"]}, {"arguments", c["arguments"]}}}});
    }
    if (!calls.empty()) message["tool_calls"] = calls;
    messages.push_back(message);
    for (const json& call : calls) {
        json result = {{"status", "done"}, {"tool", call["function"]["name"]}};
        const json& args = call["function"]["arguments"];
        if (args.is_object() && !args.empty()) result[args.begin().key()] = args.begin().value();
        messages.push_back({{"role", "tool"},
                            {"tool_call_id", call["id"]},
                            {"name", call["function"]["name"]},
                            {"content", result.dump()}});
    }
}

// A forced reply with no call that thought (random weights never close a thought): cut at
// max_tokens inside it, or, with the retries' stop sequence, stopped where it opened.
bool thought_only(const json& r, bool stopped_at_thought) {
    if (!r["function_calls"].empty()) return false;
    if (r["finish_reason"] == "length" && !r["thinking"].get<std::string>().empty()) return true;
    return stopped_at_thought && r["finish_reason"] == "stop" && r["response"] == "";
}

// Turn 1 forced, asked again with the next seed while its reply only thought (the retries stop at
// the thought's opening marker, so they cost a few tokens), turn 2 lazy after the results, turn 3
// lazy after a new user message. Stops at the first call that fails; the checks run on the test's
// thread. Returns every reply in order: turn 1's attempts, then turns 2 and 3.
std::vector<Turn> run_session(cactus_model_t model, bool compaction, const json& tools) {
    std::vector<Turn> replies;
    json messages = json::array({{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", kUser1}}});
    for (int attempt = 0; attempt < kMaxTries; ++attempt) {
        json forced = options(compaction, kSeed + attempt, kForcedTokens, true);
        if (attempt > 0) forced["stop_sequences"] = json::array({"<|channel>"});
        replies.push_back(complete(model, "turn 1 (forced)", messages, tools, forced));
        replies.back().tries = attempt + 1;
        if (!usable(replies.back()) || !thought_only(replies.back().response, attempt > 0)) break;
    }
    if (!usable(replies.back())) return replies;
    answer_calls(messages, replies.back().response, 1);
    replies.push_back(
        complete(model, "turn 2 (lazy)", messages, tools, options(compaction, kSeed, kLazyTokens, false)));
    if (!usable(replies.back())) return replies;
    answer_calls(messages, replies.back().response, 2);
    messages.push_back({{"role", "user"}, {"content", kUser3}});
    replies.push_back(
        complete(model, "turn 3 (lazy)", messages, tools, options(compaction, kSeed, kLazyTokens, false)));
    return replies;
}

void print(const std::vector<Turn>& turns, const char* mode) {
    for (const Turn& t : turns) {
        if (!usable(t)) continue;
        const json& r = t.response;
        std::printf(
            "%-4s %-16s prompt %5zu prefill %5zu decode %4zu compactions %zu calls %zu tries %d finish %s "
            "%.0f ms\n",
            mode, t.name.c_str(), r["prompt_tokens"].get<size_t>(), r["prefill_tokens"].get<size_t>(),
            r["decode_tokens"].get<size_t>(), r["kv_compactions"].get<size_t>(), r["function_calls"].size(), t.tries,
            r["finish_reason"].get<std::string>().c_str(), r["total_time_ms"].get<double>());
    }
}

const json* parameters_of(const json& tools, const std::string& name) {
    for (const json& t : tools)
        if (t["function"]["name"] == name) return &t["function"]["parameters"];
    return nullptr;
}

void expect_calls_valid(const Turn& t, const json& tools) {
    for (const json& call : t.response["function_calls"]) {
        const json* params = parameters_of(tools, call.value("name", ""));
        ASSERT_NE(params, nullptr) << t.name << ": call of a tool not offered: " << call.dump();
        EXPECT_EQ(schema_problem(call["arguments"], *params, *params), "") << t.name << ": " << call.dump();
    }
}

void expect_session(const std::vector<Turn>& replies, bool compaction, const json& tools, size_t window) {
    ASSERT_GE(replies.size(), 3u) << "the session stopped early";
    size_t compactions = 0, first_turn_compactions = 0;
    for (size_t i = 0; i < replies.size(); ++i) {
        const Turn& t = replies[i];
        ASSERT_GT(t.rc, 0) << t.name << ": " << t.error;
        ASSERT_TRUE(t.response.is_object()) << t.name << ": the response is not JSON";
        ASSERT_TRUE(t.response.value("success", false)) << t.name << ": " << t.response.dump();
        const std::string response = t.response["response"].get<std::string>();
        for (const char* m : kMarkers) {
            EXPECT_EQ(response.find(m), std::string::npos) << t.name << ": response holds " << m << ": " << response;
            EXPECT_EQ(t.streamed.find(m), std::string::npos) << t.name << ": the stream holds " << m;
        }
        expect_calls_valid(t, tools);
        compactions += t.response["kv_compactions"].get<size_t>();
        if (i + 2 < replies.size()) first_turn_compactions += t.response["kv_compactions"].get<size_t>();  // turn 1
    }
    const Turn* turns[] = {&replies[replies.size() - 3], &replies[replies.size() - 2], &replies.back()};
    EXPECT_FALSE(turns[0]->response["function_calls"].empty())
        << "forced turn 1 has no call after " << turns[0]->tries << " tries: " << turns[0]->response.dump();
    // A ring rolls back at most min(window, chunk) tokens (kv_cache.h): a turn must reuse the cached
    // prefix when the previous reply fed back no more (always for turn 3; turn 2 when turn 1 was short).
    const size_t rollback = std::min<size_t>(window, kPrefillChunk);
    for (size_t i = 1; i < 3; ++i) {
        const json& r = turns[i]->response;
        if (turns[i - 1]->response["decode_tokens"].get<size_t>() <= rollback) {
            EXPECT_LT(r["prefill_tokens"].get<size_t>(), r["prompt_tokens"].get<size_t>()) << turns[i]->name;
        }
    }
    if (compaction) {
        EXPECT_GE(first_turn_compactions, 1u) << "the ~2,800-token prompt must compact";
    } else {
        EXPECT_EQ(compactions, 0u);
    }
}

TEST(Gemma4Session, ToolsThinkingCompactionOnThenOffFromASmallStack) {
    const std::string path = test_model_path("gemma4-reduced-q4_0");
    const size_t window = cactus::GgufFile::open(path)->get_uint("gemma4.attention.sliding_window");
    ASSERT_LT(window, 2800u / 8) << "the rings must wrap many times";
    const json tools = load_tools();
    ASSERT_EQ(tools.size(), 20u);
    std::vector<Turn> on, off;
    std::string init_error;
    on_small_stack([&] {
        cactus_model_t model = cactus_init(path.c_str(), nullptr, false);
        if (model == nullptr) {
            init_error = cactus_get_last_error();
            return;
        }
        on = run_session(model, true, tools);
        off = run_session(model, false, tools);
        cactus_destroy(model);
    });
    ASSERT_EQ(init_error, "");
    print(on, "on");
    print(off, "off");
    expect_session(on, true, tools, window);
    expect_session(off, false, tools, window);
}

}  // namespace
