// Renders chat templates for the Python oracle test (tests/chat/test_template_oracle.py).
// stdin: one JSON object per line, {"template": "...", "context": {...}}, optionally with
// "engine": true to render as Engine::render_chat does: the family's ToolFormat (chosen from the
// template) prepares context.messages first and finishes the prompt after.
// stdout: one JSON object per line, {"ok": true, "text": "..."} or {"ok": false, "error": "..."}.
// Runs each render on a thread with a 256 KiB stack, as the engine does.
#include <pthread.h>

#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/tool_format.h"
#include "core/error.h"

namespace {

struct Job {
    const nlohmann::ordered_json* request;
    nlohmann::ordered_json reply;
};

void* render_job(void* arg) {
    Job* job = static_cast<Job*>(arg);
    try {
        const std::string source = job->request->at("template").get<std::string>();
        cactus::ChatTemplate tmpl(source);
        if (!job->request->value("engine", false)) {
            job->reply = {{"ok", true}, {"text", tmpl.render_ordered(job->request->at("context"))}};
            return nullptr;
        }
        std::unique_ptr<cactus::ToolFormat> format = cactus::tool_format_for(source);
        nlohmann::ordered_json context = job->request->at("context");
        if (context.contains("messages")) context["messages"] = format->prepare_messages(context["messages"]);
        std::string text = tmpl.render_ordered(context);
        format->finish_prompt(text, context.value("add_generation_prompt", false));
        job->reply = {{"ok", true}, {"text", text}};
    } catch (const std::exception& e) {
        job->reply = {{"ok", false}, {"error", e.what()}};
    }
    return nullptr;
}

nlohmann::ordered_json run_on_small_stack(const nlohmann::ordered_json& request) {
    Job job{&request, {}};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    if (pthread_create(&thread, &attr, render_job, &job) != 0) {
        pthread_attr_destroy(&attr);
        return {{"ok", false}, {"error", "template_probe: pthread_create failed"}};
    }
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    return job.reply;
}

}  // namespace

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        nlohmann::ordered_json reply;
        try {
            reply = run_on_small_stack(nlohmann::ordered_json::parse(line));
        } catch (const std::exception& e) {
            reply = {{"ok", false}, {"error", std::string("template_probe: bad request: ") + e.what()}};
        }
        std::cout << reply.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
        std::cout.flush();
    }
    return 0;
}
