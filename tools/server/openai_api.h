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

void handle_chat_completions(Server& server, const httplib::Request& req, httplib::Response& res);
void handle_completions(Server& server, const httplib::Request& req, httplib::Response& res);

// Token text for logprobs and /tokenize pieces.
std::string token_piece(Server& server, int32_t id);

}  // namespace cactus::server
