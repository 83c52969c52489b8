#pragma once
// OpenAI's API (and llama-server's extras): request fields → GenParams, and the formatters of
// chat.completion / text_completion objects and their streamed chunks.
#include <memory>

#include "completion.h"
#include "server.h"

namespace cactus::server {

// Sampling, stop, length and deadline fields shared by the OpenAI endpoints.
void read_openai_sampling(Server& server, const json& body, GenParams& p);
// The hand-off settings of a request; *forced when the request asks for the hand-off outright.
HandoffPlan handoff_plan(Server& server, const json& body, const char* endpoint, bool* forced);

// A chat request read and prepared: the rendered prompt, its ids (and image rows) and the sampling,
// length, constraint and deadline settings in params, the tools shown to the model. The chat
// endpoints of other protocols (/v1/responses, /v1/messages) translate their request into a chat
// body and share this.
struct ChatRequest {
    GenParams params;
    std::string prompt;  // the rendered chat (the reply parser reads where it ends)
    json tools = json::array();
    std::vector<ImageInput> images;
    bool stream = false;
    bool include_usage = false;
};
ChatRequest read_chat_request(Server& server, const json& body);

void handle_chat_completions(Server& server, const httplib::Request& req, httplib::Response& res);
void handle_completions(Server& server, const httplib::Request& req, httplib::Response& res);

// Token text for logprobs and /tokenize pieces.
std::string token_piece(Server& server, int32_t id);

}  // namespace cactus::server
