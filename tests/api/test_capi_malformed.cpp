// Malformed inputs to the C API: each returns an error with a message and leaves the handle usable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/capi_fixture.h"

using cactus::testing::normal_completion;
using cactus::testing::shared_model;

namespace {

struct BadRequest {
    std::string name;
    std::string messages;
    std::string options;  // "" = NULL
    std::string tools;    // "" = NULL
    std::string expect;   // a fragment of the error message
};

std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
}

const std::string kUser = R"([{"role":"user","content":"hi"}])";

std::vector<BadRequest> corpus() {
    std::vector<BadRequest> c = {
        {"empty text", "", "", "", "not valid JSON"},
        {"not json", "hello", "", "", "not valid JSON"},
        {"truncated", R"([{"role":"user","content":"hi")", "", "", "not valid JSON"},
        {"trailing comma", R"([{"role":"user","content":"hi"},])", "", "", "not valid JSON"},
        {"single quotes", R"([{'role':'user','content':'hi'}])", "", "", "not valid JSON"},
        {"object not array", R"({"role":"user","content":"hi"})", "", "", "array"},
        {"empty list", "[]", "", "", "empty"},
        {"number", "42", "", "", "array"},
        {"null", "null", "", "", "array"},
        {"message is string", R"(["hi"])", "", "", "must be an object"},
        {"message is null", R"([null])", "", "", "must be an object"},
        {"missing role", R"([{"content":"hi"}])", "", "", "role"},
        {"role number", R"([{"role":1,"content":"hi"}])", "", "", "role"},
        {"unknown role", R"([{"role":"wizard","content":"hi"}])", "", "", "unknown role 'wizard'"},
        {"empty role", R"([{"role":"","content":"hi"}])", "", "", "unknown role"},
        {"missing content", R"([{"role":"user"}])", "", "", "content"},
        {"content number", R"([{"role":"user","content":5}])", "", "", "content"},
        {"content object", R"([{"role":"user","content":{"a":1}}])", "", "", "content"},
        {"content part not object", R"([{"role":"user","content":["x"]}])", "", "", "content part"},
        {"content part no type", R"([{"role":"user","content":[{"text":"x"}]}])", "", "", "type"},
        {"content part unknown type", R"([{"role":"user","content":[{"type":"video"}]}])", "", "", "video"},
        {"text part no text", R"([{"role":"user","content":[{"type":"text"}]}])", "", "", "text"},
        {"tool_calls not array", R"([{"role":"assistant","content":"","tool_calls":5}])", "", "", "tool_calls"},
        {"tool call no name", R"([{"role":"assistant","content":"","tool_calls":[{"function":{}}]}])", "", "", "name"},
        {"name not string", R"([{"role":"tool","content":"x","name":3}])", "", "", "name"},
        {"images not array", R"([{"role":"user","content":"x","images":"a.png"}])", "", "", "images"},
        {"image path not string", R"([{"role":"user","content":"x","images":[7]}])", "", "", "images"},
        {"image on a text model", R"([{"role":"user","content":"x","images":["/tmp/a.png"]}])", "", "",
         "no vision projector"},
        {"audio not array", R"([{"role":"user","content":"x","audio":"a.wav"}])", "", "", "audio"},
        {"audio path not string", R"([{"role":"user","content":"x","audio":[7]}])", "", "", "audio"},
        {"audio on a text model", R"([{"role":"user","content":"x","audio":["/tmp/a.wav"]}])", "", "",
         "no audio encoder"},
        {"image_url remote",
         R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}])", "", "",
         "only local paths"},
        {"image_url no url", R"([{"role":"user","content":[{"type":"image_url","image_url":{}}]}])", "", "",
         "image_url.url"},
        {"image_url part on a text model",
         R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///tmp/a.png"}}]}])", "", "",
         "no vision projector"},
        {"deep nesting", repeat("[", 100000) + repeat("]", 100000), "", "", "nested deeper"},
        {"invalid utf8", "[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]", "", "", "not valid JSON"},
        {"overlong utf8", "[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]", "", "", "not valid JSON"},
        {"lone surrogate escape", R"([{"role":"user","content":"\ud800"}])", "", "", "not valid JSON"},
        {"options not json", kUser, "{max_tokens:5}", "", "options_json is not valid JSON"},
        {"options array", kUser, "[1]", "", "object"},
        {"unknown option", kUser, R"({"max_tokenz":5})", "", "unknown key 'max_tokenz'"},
        {"max_tokens string", kUser, R"({"max_tokens":"5"})", "", "'max_tokens'"},
        {"max_tokens negative", kUser, R"({"max_tokens":-1})", "", "'max_tokens'"},
        {"max_tokens zero", kUser, R"({"max_tokens":0})", "", "'max_tokens'"},
        {"max_tokens huge", kUser, R"({"max_tokens":1e300})", "", "'max_tokens'"},
        {"max_tokens 2^64", kUser, R"({"max_tokens":18446744073709551615})", "", "'max_tokens'"},
        {"max_tokens fraction", kUser, R"({"max_tokens":2.5})", "", "'max_tokens'"},
        {"temperature negative", kUser, R"({"temperature":-0.5})", "", "'temperature'"},
        {"temperature bool", kUser, R"({"temperature":true})", "", "'temperature'"},
        {"top_p above one", kUser, R"({"top_p":1.5})", "", "'top_p'"},
        {"top_k negative", kUser, R"({"top_k":-3})", "", "'top_k'"},
        {"min_p one", kUser, R"({"min_p":1})", "", "'min_p'"},
        {"repetition_penalty zero", kUser, R"({"repetition_penalty":0})", "", "'repetition_penalty'"},
        {"seed negative", kUser, R"({"seed":-7})", "", "'seed'"},
        {"stop not list", kUser, R"({"stop_sequences":"x"})", "", "'stop_sequences'"},
        {"stop list of numbers", kUser, R"({"stop_sequences":[1,2]})", "", "'stop_sequences'"},
        {"n_ctx tiny", kUser, R"({"n_ctx":1})", "", "'n_ctx'"},
        {"prefill_chunk zero", kUser, R"({"prefill_chunk":0})", "", "'prefill_chunk'"},
        {"thinking as string", kUser, R"({"enable_thinking_if_supported":"yes"})", "",
         "'enable_thinking_if_supported'"},
        {"confidence above one", kUser, R"({"confidence_threshold":2})", "", "'confidence_threshold'"},
        {"tools not json", kUser, "", "[{", "tools_json is not valid JSON"},
        {"tools object", kUser, "", R"({"type":"function"})", "array"},
        {"tool not object", kUser, "", R"([1])", "tools[0]"},
        {"tool no function", kUser, "", R"([{"type":"function"}])", "tools[0]"},
        {"tool empty name", kUser, "", R"([{"type":"function","function":{"name":""}}])", "name"},
        {"tool params not object", kUser, "", R"([{"type":"function","function":{"name":"f","parameters":"x"}}])",
         "parameters"},
    };
    return c;
}

std::string call(cactus_model_t model, const BadRequest& r, int* rc) {
    static char buffer[1 << 16];
    buffer[0] = '\0';
    *rc = cactus_complete(model, r.messages.c_str(), buffer, sizeof buffer,
                          r.options.empty() ? nullptr : r.options.c_str(), r.tools.empty() ? nullptr : r.tools.c_str(),
                          nullptr, nullptr, nullptr, 0);
    return buffer;
}

}  // namespace

TEST(CApiMalformed, CorpusHasAtLeastFiftyCases) { EXPECT_GE(corpus().size(), 50u); }

TEST(CApiMalformed, EveryCaseIsAnErrorWithAMessageAndTheHandleStaysUsable) {
    cactus_model_t model = shared_model("smollm2-135m");
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    for (const BadRequest& r : corpus()) {
        int rc = 0;
        std::string response = call(model, r, &rc);
        EXPECT_EQ(rc, CACTUS_ERROR) << r.name;
        std::string error = cactus_get_last_error();
        EXPECT_NE(error.find(r.expect), std::string::npos) << r.name << ": " << error;
        auto parsed = nlohmann::json::parse(response, nullptr, false);
        ASSERT_FALSE(parsed.is_discarded()) << r.name;
        EXPECT_EQ(parsed["success"], false) << r.name;
        EXPECT_EQ(parsed["error"].get<std::string>(), error) << r.name;
    }
    std::string ok;
    EXPECT_GT(normal_completion(model, &ok), 0) << cactus_get_last_error();
    EXPECT_EQ(nlohmann::json::parse(ok)["success"], true);
}

TEST(CApiMalformed, NullArgumentsAreErrors) {
    cactus_model_t model = shared_model("smollm2-135m");
    char buffer[4096];
    EXPECT_EQ(cactus_complete(nullptr, "[]", buffer, sizeof buffer, nullptr, nullptr, nullptr, nullptr, nullptr, 0),
              -1);
    EXPECT_NE(std::string(cactus_get_last_error()).find("NULL"), std::string::npos);
    EXPECT_EQ(cactus_complete(model, nullptr, buffer, sizeof buffer, nullptr, nullptr, nullptr, nullptr, nullptr, 0),
              -1);
    EXPECT_EQ(cactus_complete(model, kUser.c_str(), nullptr, 100, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
    EXPECT_EQ(cactus_complete(model, kUser.c_str(), buffer, 0, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
    EXPECT_EQ(cactus_render_prompt(model, kUser.c_str(), nullptr, nullptr, nullptr, 10), -1);
    const uint8_t pcm[4] = {0, 0, 0, 0};  // a text model keeps refusing pcm_buffer
    EXPECT_EQ(cactus_complete(model, kUser.c_str(), buffer, sizeof buffer, nullptr, nullptr, nullptr, nullptr, pcm, 4),
              -1);
    EXPECT_NE(std::string(cactus_get_last_error()).find("this model has no audio encoder"), std::string::npos);
    EXPECT_EQ(cactus_prefill(model, kUser.c_str(), buffer, sizeof buffer, nullptr, nullptr, nullptr, 4), -1);
    EXPECT_NE(std::string(cactus_get_last_error()).find("no audio encoder"), std::string::npos);
    size_t n = 0;
    EXPECT_EQ(cactus_tokenize(model, nullptr, nullptr, 0, &n), -1);
    EXPECT_EQ(cactus_tokenize(model, "x", nullptr, 0, nullptr), -1);
    EXPECT_EQ(cactus_init(nullptr, nullptr, false), nullptr);
    EXPECT_EQ(cactus_init("/nonexistent/model.gguf", nullptr, false), nullptr);
    EXPECT_NE(std::string(cactus_get_last_error()).find("does not exist"), std::string::npos);
    EXPECT_EQ(cactus_init("no-such-model", nullptr, false), nullptr);
    EXPECT_NE(std::string(cactus_get_last_error()).find("unknown model"), std::string::npos);
    EXPECT_EQ(cactus_set_backend("tpu"), -1);
    EXPECT_EQ(cactus_set_backend("cpu"), 0);
    cactus_reset(nullptr);
    cactus_stop(nullptr);
    cactus_destroy(nullptr);
    EXPECT_GT(normal_completion(model), 0) << cactus_get_last_error();
}

TEST(CApiMalformed, TinyBuffersNeverOverflow) {
    cactus_model_t model = shared_model("smollm2-135m");
    for (size_t size : {1u, 2u, 16u, 100u}) {
        std::vector<char> buffer(size + 64, '#');
        int rc = cactus_complete(model, kUser.c_str(), buffer.data(), size, R"({"max_tokens":4})", nullptr, nullptr,
                                 nullptr, nullptr, 0);
        EXPECT_EQ(rc, CACTUS_BUFFER_TOO_SMALL) << size;
        EXPECT_NE(std::string(cactus_get_last_error()).find("buffer_size"), std::string::npos);
        for (size_t i = size; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], '#') << "wrote past buffer_size " << size;
    }
    uint32_t ids[2];
    size_t n = 0;
    EXPECT_EQ(cactus_tokenize(model, "a fairly long sentence with many tokens", ids, 2, &n), CACTUS_BUFFER_TOO_SMALL);
    EXPECT_GT(n, 2u);
    char small[8];
    EXPECT_EQ(cactus_render_prompt(model, kUser.c_str(), nullptr, nullptr, small, sizeof small),
              CACTUS_BUFFER_TOO_SMALL);
    EXPECT_GT(normal_completion(model), 0) << cactus_get_last_error();
}

TEST(CApiMalformed, PromptLongerThanContextIsAnError) {
    cactus_model_t model = shared_model("smollm2-135m");
    std::string long_text = repeat("word ", 3000);
    std::string messages = R"([{"role":"user","content":")" + long_text + R"("}])";
    static char buffer[1 << 16];
    int rc = cactus_complete(model, messages.c_str(), buffer, sizeof buffer, R"({"n_ctx":1024,"max_tokens":4})",
                             nullptr, nullptr, nullptr, nullptr, 0);
    EXPECT_EQ(rc, CACTUS_ERROR);
    EXPECT_NE(std::string(cactus_get_last_error()).find("context"), std::string::npos) << cactus_get_last_error();
    EXPECT_GT(normal_completion(model), 0) << cactus_get_last_error();
}
