// libFuzzer target for the output side of every tool-call format: a model's reply is untrusted
// text (sampled, or constrained by a grammar the app chose). Any bytes must parse into
// response / thinking / calls, stream through the filter, and read as call literals without a
// crash, a stack overflow (the parsers bound their nesting; this runs on a 256 KiB stack, x16
// under ASan as in fuzz_template) or a hang (bounded retries); the visible text never grows.
// Seeds: tests/fuzz/seeds/fuzz_tool_calls; dictionary: tests/fuzz/tool_calls.dict.
#include <pthread.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "chat/call_syntax.h"
#include "chat/output_parser.h"
#include "chat/stream_filter.h"
#include "chat/tool_format.h"
#include "core/error.h"

namespace {

using json = nlohmann::ordered_json;

struct Job {
    const uint8_t* data;
    size_t size;
};

void check(bool ok) {
    if (!ok) std::abort();
}

void* run(void* arg) {
    const Job* job = static_cast<const Job*>(arg);
    const std::string text(reinterpret_cast<const char*>(job->data), job->size);
    for (auto make : {cactus::make_hermes_format, cactus::make_lfm2_format, cactus::make_gemma_format,
                      cactus::make_gemma4_format, cactus::make_json_format}) {
        std::unique_ptr<cactus::ToolFormat> format = make();
        cactus::ParsedReply reply = cactus::parse_reply(*format, text, true);
        check(reply.response.size() <= text.size() && reply.thinking.size() <= text.size());
        for (const json& call : reply.function_calls) check(call.contains("name") && call.contains("arguments"));
        const std::vector<cactus::HiddenRegion> regions = format->hidden_regions();
        cactus::StreamFilter filter(regions, cactus::region_open_at_end(regions, text));
        const size_t step = 1 + job->size % 7;
        std::string shown;
        for (size_t p = 0; p < text.size(); p += step) shown += filter.push(text.substr(p, step));
        shown += filter.finish();
        check(shown.size() <= text.size());
    }
    json calls = json::array();
    cactus::read_gemma_call(text, calls, cactus::CallSyntax::gemma);
    cactus::read_gemma_call(text, calls, cactus::CallSyntax::gemma4);
    cactus::read_python_calls(text, calls);
    for (const json& call : calls) {
        for (cactus::CallSyntax s : {cactus::CallSyntax::python, cactus::CallSyntax::gemma4})
            check(!cactus::write_call(call, s).empty());
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
