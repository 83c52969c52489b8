// libFuzzer target for the chat-template engine (templates come from GGUF metadata, i.e. from the
// internet): any input must parse and render or throw cactus::Error; never crash, overflow the
// stack, hang (kMaxEvalSteps) or exhaust memory (kMaxStringBytes). Seeded with the real templates
// in tests/chat/templates. The render runs on a 256 KiB stack (x16 under ASan, whose frames grow),
// as the engine does.
#include <pthread.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"

namespace {

struct Job {
    const uint8_t* data;
    size_t size;
};

const nlohmann::ordered_json& context() {
    static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Hi <b>there</b> \u00e9"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}}]},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]}
      ],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
    })");
    return ctx;
}

void* run(void* arg) {
    const Job* job = static_cast<const Job*>(arg);
    try {
        cactus::ChatTemplate t(std::string(reinterpret_cast<const char*>(job->data), job->size));
        std::string out = t.render_ordered(context());
        if (out.size() == 0xdeadbeef) std::abort();
    } catch (const cactus::Error&) {
        // rejected cleanly
    }
    return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Job job{data, size};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024 * 16);
    pthread_t thread;
    if (pthread_create(&thread, &attr, run, &job) != 0) std::abort();
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    return 0;
}
