#pragma once
// OpenAI's API (and llama-server's extras): request fields → GenParams, and the formatters of
// chat.completion / text_completion objects and their streamed chunks.
#include <memory>

#include "completion.h"
#include "media.h"
#include "server.h"

namespace cactus::server {

// Sampling, stop, length and deadline fields shared by the OpenAI endpoints; a field left out takes
// the server's RequestDefaults (llama-server's flags). `n` > 1 is a 400 unless the caller runs
// several choices (choices_handled): then it reads `n` itself (read_choices).
void read_openai_sampling(Server& server, const json& body, GenParams& p, bool choices_handled = false);
// `n` (llama-server's n_cmpl too): the number of choices, 1..kMaxChoices. Choice i samples with the
// request's seed + i.
constexpr int64_t kMaxChoices = 8;
size_t read_choices(const json& body);
// The hand-off settings of a request; *forced when the request asks for the hand-off outright.
HandoffPlan handoff_plan(Server& server, const json& body, const char* endpoint, bool* forced);

// A chat request read and prepared: the rendered prompt, its ids (and image and audio rows) and the sampling,
// length, constraint and deadline settings in params, the tools shown to the model. The chat
// endpoints of other protocols (/v1/responses, /v1/messages) translate their request into a chat
// body and share this.
struct ChatRequest {
    GenParams params;
    std::string prompt;  // the rendered chat (the reply parser reads where it ends)
    json tools = json::array();
    RequestMedia media;  // the messages' images and audio clips, in order
    bool stream = false;
    bool include_usage = false;
    size_t n_choices = 1;                   // `n`: choice i samples with params' seed + i
    std::string reasoning_format = "auto";  // none: thinking stays in the content, as generated
};
ChatRequest read_chat_request(Server& server, const json& body);

void handle_chat_completions(Server& server, const httplib::Request& req, httplib::Response& res);
void handle_completions(Server& server, const httplib::Request& req, httplib::Response& res);

// Token text for logprobs and /tokenize pieces.
std::string token_piece(Server& server, int32_t id);

}  // namespace cactus::server
