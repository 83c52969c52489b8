// Renders chat templates for the Python oracle test (tests/chat/test_template_oracle.py).
// stdin: one JSON object per line, {"template": "...", "context": {...}}.
// stdout: one JSON object per line, {"ok": true, "text": "..."} or {"ok": false, "error": "..."}.
// Runs each render on a thread with a 256 KiB stack, as the engine does.
#include <pthread.h>

#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"

namespace {

struct Job {
    const nlohmann::ordered_json* request;
    nlohmann::ordered_json reply;
};

void* render_job(void* arg) {
    Job* job = static_cast<Job*>(arg);
    try {
        cactus::ChatTemplate tmpl(job->request->at("template").get<std::string>());
        job->reply = {{"ok", true}, {"text", tmpl.render_ordered(job->request->at("context"))}};
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
