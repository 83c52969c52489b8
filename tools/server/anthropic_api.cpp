// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens), which llama-server serves. A
// Messages request is translated into a chat body, as llama-server does (server-chat.cpp,
// server_chat_convert_anthropic_to_oai), and prepared by read_chat_request; the reply is parsed in
// the model family's format (ReplyReader) into thinking, text and tool_use content blocks. Errors
// have Anthropic's shape (Server::wrap with ErrorStyle::anthropic).
#include <httplib.h>

#include "chat_translation.h"
#include "openai_api.h"
#include "params.h"
#include "reply.h"

namespace cactus::server {

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Anthropic requires max_tokens; llama-server lets it out and uses this.
constexpr int64_t kDefaultMaxTokens = 4096;

[[noreturn]] void bad_message(size_t index, const std::string& what) {
    throw HttpError{400, "messages[" + std::to_string(index) + "]: " + what, "messages"};
}

// --- request: Messages → chat -----------------------------------------------------------------

std::string system_text(const json& system) {
    if (system.is_string()) return system.get<std::string>();
    if (!system.is_array()) throw HttpError{400, "'system' must be a string or an array of text blocks", "system"};
    std::string text;
    for (const json& block : system) {
        if (!block.is_object() || block.value("type", "") != "text" || !block.contains("text") ||
            !block["text"].is_string())
            throw HttpError{400, "'system' blocks must be {type: text, text}", "system"};
        text += block["text"].get<std::string>();
    }
    return text;
}

json image_part(const json& block, size_t index) {
    const json source = block.value("source", json::object());
    const std::string type = source.is_object() ? source.value("type", "") : "";
    if (type == "base64") {
        if (!source.contains("data") || !source["data"].is_string())
            bad_message(index, "a base64 image source needs string 'data'");
        const std::string url = "data:" + source.value("media_type", std::string("image/jpeg")) + ";base64," +
                                source["data"].get<std::string>();
        return json{{"type", "image_url"}, {"image_url", {{"url", url}}}};
    }
    if (type == "url" && source.contains("url") && source["url"].is_string())
        return json{{"type", "image_url"}, {"image_url", {{"url", source["url"]}}}};
    bad_message(index, "an image needs source {type: base64, media_type, data} or {type: url, url}");
}

// A tool_result's content: a string, or text blocks joined.
std::string tool_result_text(const json& block, size_t index) {
    const json content = block.value("content", json(""));
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) bad_message(index, "a tool_result's 'content' must be a string or an array of blocks");
    std::string text;
    for (const json& part : content) {
        if (!part.is_object() || part.value("type", "") != "text")
            bad_message(index, "a tool_result's content blocks must be text blocks");
        text += part.value("text", "");
    }
    return text;
}

// One Anthropic message → chat messages: tool results first (they answer the previous turn's calls,
// which a chat template expects right after them), then the message's text, images and calls.
void add_message(json& messages, const json& m, size_t index) {
    if (!m.is_object()) bad_message(index, "must be an object");
    const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
    if (role != "user" && role != "assistant") bad_message(index, "'role' must be user or assistant");
    if (!m.contains("content")) bad_message(index, "'content' is required");
    const json& content = m["content"];
    if (content.is_string()) {
        messages.push_back(json{{"role", role}, {"content", content}});
        return;
    }
    if (!content.is_array()) bad_message(index, "'content' must be a string or an array of content blocks");
    json parts = json::array();
    json calls = json::array();
    for (const json& block : content) {
        const std::string type = block.is_object() ? block.value("type", "") : "";
        if (type == "text") {
            if (!block.contains("text") || !block["text"].is_string())
                bad_message(index, "a text block needs a string 'text'");
            parts.push_back(json{{"type", "text"}, {"text", block["text"]}});
        } else if (type == "image") {
            parts.push_back(image_part(block, index));
        } else if (type == "tool_use") {
            if (!block.contains("name") || !block["name"].is_string())
                bad_message(index, "a tool_use block needs a string 'name'");
            calls.push_back(
                json{{"id", block.value("id", "")},
                     {"type", "function"},
                     {"function", {{"name", block["name"]}, {"arguments", block.value("input", json::object())}}}});
        } else if (type == "tool_result") {
            messages.push_back(json{{"role", "tool"},
                                    {"tool_call_id", block.value("tool_use_id", "")},
                                    {"content", tool_result_text(block, index)}});
        } else if (type == "thinking" || type == "redacted_thinking") {
            // Earlier thinking is not shown to the model again (chat templates drop it too).
        } else {
            bad_message(index, "content block type '" + type +
                                   "' is not supported (text, image, tool_use, tool_result, thinking)");
        }
    }
    if (parts.empty() && calls.empty()) return;
    json chat = {{"role", role}, {"content", joined_text_parts(parts)}};
    if (!calls.empty()) chat["tool_calls"] = calls;
    messages.push_back(chat);
}

json chat_tools(const json& tools) {
    if (!tools.is_array()) throw HttpError{400, "'tools' must be an array", "tools"};
    json out = json::array();
    for (const json& t : tools) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
            throw HttpError{400, "each tool needs a string 'name'", "tools"};
        // Anthropic's server tools (web_search, code_execution, ...) have a type and no input_schema:
        // they run at Anthropic, so they are left out here.
        if (!t.contains("input_schema") && t.contains("type") && t["type"] != "custom") continue;
        json fn = {{"name", t["name"]},
                   {"description", t.value("description", "")},
                   {"parameters", t.value("input_schema", json{{"type", "object"}, {"properties", json::object()}})}};
        out.push_back(json{{"type", "function"}, {"function", fn}});
    }
    return out;
}

// tool_choice → chat's tool_choice and parallel_tool_calls (Anthropic allows several calls unless
// disable_parallel_tool_use).
void read_tool_choice(const json& choice, json& chat) {
    if (!choice.is_object() || !choice.contains("type") || !choice["type"].is_string())
        throw HttpError{400, "'tool_choice' must be {type: auto|any|tool|none}", "tool_choice"};
    const std::string type = choice["type"].get<std::string>();
    if (type == "auto") {
        chat["tool_choice"] = "auto";
    } else if (type == "any") {
        chat["tool_choice"] = "required";
    } else if (type == "none") {
        chat["tool_choice"] = "none";
    } else if (type == "tool") {
        if (!choice.contains("name") || !choice["name"].is_string())
            throw HttpError{400, "'tool_choice' {type: tool} needs a string 'name'", "tool_choice"};
        chat["tool_choice"] = json{{"type", "function"}, {"function", {{"name", choice["name"]}}}};
    } else {
        throw HttpError{400, "'tool_choice.type' must be auto, any, tool or none", "tool_choice"};
    }
    chat["parallel_tool_calls"] = !read_bool(choice, "disable_parallel_tool_use", false);
}

json chat_body_of(const json& body) {
    json chat = json::object();
    json messages = json::array();
    if (const json* system = field(body, "system"))
        messages.push_back(json{{"role", "system"}, {"content", system_text(*system)}});
    const json* list = field(body, "messages");
    if (list == nullptr || !list->is_array()) throw HttpError{400, "'messages' must be an array", "messages"};
    for (size_t i = 0; i < list->size(); ++i) add_message(messages, (*list)[i], i);
    chat["messages"] = messages;
    if (const json* tools = field(body, "tools")) chat["tools"] = chat_tools(*tools);
    chat["parallel_tool_calls"] = true;
    if (const json* choice = field(body, "tool_choice")) read_tool_choice(*choice, chat);
    if (const json* stop = field(body, "stop_sequences")) chat["stop"] = *stop;
    chat["max_tokens"] = body.value("max_tokens", json(kDefaultMaxTokens));
    // Anthropic's sampling fields, llama-server's chat_template_kwargs and our per-request timeout.
    for (const char* key : {"temperature", "top_p", "top_k", "stream", "chat_template_kwargs", "timeout"})
        if (const json* v = field(body, key)) chat[key] = *v;
    return chat;
}

// The chat request of a Messages body; errors name the Messages field.
ChatRequest read_messages_request(Server& server, const json& body) {
    const json chat = chat_body_of(body);
    try {
        return read_chat_request(server, chat);
    } catch (HttpError& e) {
        if (e.param == "stop") e.param = "stop_sequences";
        // Anthropic's errors have no param field: the message names the field instead.
        const bool named =
            e.message.find('\'' + e.param + '\'') != std::string::npos || e.message.rfind(e.param, 0) == 0;
        if (!e.param.empty() && !named) e.message = e.param + ": " + e.message;
        throw;
    }
}

// --- response ----------------------------------------------------------------------------------

class MessagesFormatter final : public Formatter {
public:
    MessagesFormatter(Server& server, const json& body, bool tools_offered, const std::string& prompt,
                      size_t prompt_tokens)
        : reader_(server.backend().engine().tool_format(), prompt),
          tools_(tools_offered),
          id_(random_id("msg_")),
          model_(read_string(body, "model", server.config().alias)),
          prompt_tokens_(prompt_tokens) {}

    std::string content_type(bool stream) const override { return stream ? "text/event-stream" : "application/json"; }

    std::string stream_start() override {
        json message = {{"id", id_},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", model_},
                        {"content", json::array()},
                        {"stop_reason", nullptr},
                        {"stop_sequence", nullptr},
                        {"usage",
                         {{"input_tokens", prompt_tokens_ - std::min(cached_tokens_, prompt_tokens_)},
                          {"output_tokens", 0},
                          {"cache_read_input_tokens", cached_tokens_}}}};
        return event("message_start", json{{"message", message}}) + event("ping", json::object());
    }

    void observe(const GenEvent& e) override { cached_tokens_ = e.stats.cached_tokens; }

    std::string stream_piece(const std::string& piece, const std::vector<TokenInfo>&) override {
        if (tools_) return std::string();  // calls are parsed from the whole reply at the end
        return text_delta(reader_.stream(piece));
    }

    std::string stream_end(const Completion& c) override {
        std::string out;
        if (!tools_) out += text_delta(reader_.stream_end());
        if (text_open_) out += block_stop();
        const ParsedReply reply = reader_.parse(c.text, tools_);
        if (!reply.thinking.empty()) {
            out += block_start(json{{"type", "thinking"}, {"thinking", ""}});
            out += block_delta(json{{"type", "thinking_delta"}, {"thinking", reply.thinking}});
            out += block_delta(json{{"type", "signature_delta"}, {"signature", ""}});
            out += block_stop();
        }
        if (tools_ && !reply.response.empty()) {
            out += text_delta(reply.response);
            out += block_stop();
        }
        for (const json& call : reply.function_calls) {
            json start = tool_use(call);
            const std::string input = dump(start["input"]);
            start["input"] = json::object();
            out += block_start(start);
            out += block_delta(json{{"type", "input_json_delta"}, {"partial_json", input}});
            out += block_stop();
        }
        const json delta = {{"stop_reason", stop_reason(c, reply)},
                            {"stop_sequence", c.stop_word.empty() ? json(nullptr) : json(c.stop_word)}};
        out += event("message_delta", json{{"delta", delta}, {"usage", usage(c)}});
        return out + event("message_stop", json::object());
    }

    std::string stream_error(int, const std::string& message) override {
        return event("error", json{{"error", {{"type", "api_error"}, {"message", message}}}});
    }

    std::string whole(const Completion& c) override {
        const ParsedReply reply = reader_.parse(c.text, tools_);
        json content = json::array();
        if (!reply.thinking.empty())
            content.push_back(json{{"type", "thinking"}, {"thinking", reply.thinking}, {"signature", ""}});
        if (!reply.response.empty() || reply.function_calls.empty())
            content.push_back(json{{"type", "text"}, {"text", reply.response}});
        for (const json& call : reply.function_calls) content.push_back(tool_use(call));
        return dump(json{{"id", id_},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", model_},
                         {"content", content},
                         {"stop_reason", stop_reason(c, reply)},
                         {"stop_sequence", c.stop_word.empty() ? json(nullptr) : json(c.stop_word)},
                         {"usage", usage(c)}});
    }

private:
    static std::string stop_reason(const Completion& c, const ParsedReply& reply) {
        if (c.finish_reason == "length") return "max_tokens";
        if (!c.stop_word.empty()) return "stop_sequence";
        return reply.function_calls.empty() ? "end_turn" : "tool_use";
    }

    // Anthropic counts cached prompt tokens apart from input_tokens.
    static json usage(const Completion& c) {
        return json{{"input_tokens", c.stats.prompt_tokens - c.stats.cached_tokens},
                    {"cache_creation_input_tokens", 0},
                    {"cache_read_input_tokens", c.stats.cached_tokens},
                    {"output_tokens", c.stats.completion_tokens}};
    }

    static json tool_use(const json& call) {
        json input = call.value("arguments", json::object());
        if (!input.is_object()) input = json::object();
        return json{
            {"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", call.value("name", "")}, {"input", input}};
    }

    static std::string event(const char* type, json data) {
        json e = {{"type", type}};
        for (const auto& [key, value] : data.items()) e[key] = value;
        return sse_event(type, e);
    }

    std::string block_start(const json& block) {
        return event("content_block_start", json{{"index", n_blocks_}, {"content_block", block}});
    }
    std::string block_delta(const json& delta) {
        return event("content_block_delta", json{{"index", n_blocks_}, {"delta", delta}});
    }
    std::string block_stop() {
        text_open_ = false;
        return event("content_block_stop", json{{"index", n_blocks_++}});
    }

    // Text into the open text block, opened at its first text.
    std::string text_delta(const std::string& text) {
        if (text.empty()) return std::string();
        std::string out;
        if (!text_open_) {
            out += block_start(json{{"type", "text"}, {"text", ""}});
            text_open_ = true;
        }
        return out + block_delta(json{{"type", "text_delta"}, {"text", text}});
    }

    ReplyReader reader_;
    bool tools_;
    std::string id_;
    std::string model_;
    size_t prompt_tokens_;
    size_t cached_tokens_ = 0;  // of the prompt, from the job's first event
    size_t n_blocks_ = 0;       // index of the block being written
    bool text_open_ = false;
};

void handle_messages(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    ChatRequest r = read_messages_request(server, body);
    auto f = std::make_shared<MessagesFormatter>(server, body, !r.tools.empty(), r.prompt, r.params.prompt.size());
    std::vector<GenEvent> first;
    std::shared_ptr<Job> job = start_job(server, std::move(r.params), &first);
    respond(res, server, job, std::move(first), f, r.stream, HandoffPlan{});
}

}  // namespace

void install_anthropic(Server& server, httplib::Server& http, const Wrap& wrap) {
    Server* s = &server;
    http.Post("/v1/messages",
              wrap([s](const httplib::Request& q, httplib::Response& r) { handle_messages(*s, q, r); }));
    http.Post("/v1/messages/count_tokens", wrap([s](const httplib::Request& q, httplib::Response& r) {
                  const ChatRequest chat = read_messages_request(*s, parse_body(q));
                  send_json(r, 200, json{{"input_tokens", chat.params.prompt.size()}});
              }));
}

}  // namespace cactus::server
