// OpenAI's Responses API (/v1/responses) and the token counters of llama-server
// (/v1/responses/input_tokens, /v1/chat/completions/input_tokens). A Responses request is
// translated into a chat body, as llama-server does (server-chat.cpp,
// server_chat_convert_responses_to_chatcmpl), and prepared by read_chat_request; the reply is parsed
// in the model family's format (ReplyReader) into reasoning, message and function_call output items.
#include <ctime>

#include <httplib.h>

#include "chat_translation.h"
#include "openai_api.h"
#include "params.h"
#include "reply.h"
#include "tokenizer/tokenizer.h"

namespace cactus::server {

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

[[noreturn]] void bad_input(size_t index, const std::string& what) {
    throw HttpError{400, "input[" + std::to_string(index) + "]: " + what, "input"};
}

// --- request: Responses → chat ---------------------------------------------------------------

// A content part of an input message → a chat content part.
json chat_part(const json& part, size_t index) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        bad_input(index, "each content part must be an object with a string 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type == "input_text" || type == "output_text") {
        if (!part.contains("text") || !part["text"].is_string()) bad_input(index, "a text part needs a string 'text'");
        return json{{"type", "text"}, {"text", part["text"]}};
    }
    if (type == "refusal") return json{{"type", "text"}, {"text", part.value("refusal", "")}};
    if (type == "input_image") {
        if (!part.contains("image_url") || !part["image_url"].is_string())
            bad_input(index,
                      "an input_image part needs 'image_url' (a data: URL or a local path; file_id is "
                      "not supported: there is no file store)");
        return json{{"type", "image_url"}, {"image_url", {{"url", part["image_url"]}}}};
    }
    bad_input(index, "content part type '" + type + "' is not supported (input_text, output_text, input_image)");
}

json chat_content(const json& content, size_t index) {
    if (content.is_string()) return content;
    if (!content.is_array()) bad_input(index, "'content' must be a string or an array of parts");
    json parts = json::array();
    for (const json& part : content) parts.push_back(chat_part(part, index));
    return joined_text_parts(parts);
}

// The assistant message that a function_call item joins: the previous one when it is the
// assistant's (a reply of text and calls arrives as several items), else a new one.
json& assistant_turn(json& messages) {
    if (messages.empty() || messages.back().value("role", "") != "assistant")
        messages.push_back(json{{"role", "assistant"}, {"content", ""}});
    return messages.back();
}

void add_item(json& messages, const json& item, size_t index) {
    if (!item.is_object()) bad_input(index, "each item must be an object");
    const std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>() : "";
    if (item.contains("role") && (type.empty() || type == "message")) {
        if (!item["role"].is_string()) bad_input(index, "'role' must be a string");
        const std::string role = item["role"].get<std::string>();
        if (role != "user" && role != "system" && role != "developer" && role != "assistant")
            bad_input(index, "'role' must be user, system, developer or assistant");
        if (!item.contains("content")) bad_input(index, "a message needs 'content'");
        messages.push_back(json{{"role", role}, {"content", chat_content(item["content"], index)}});
        return;
    }
    if (type == "function_call") {
        for (const char* key : {"call_id", "name", "arguments"})
            if (!item.contains(key) || !item[key].is_string())
                bad_input(index, std::string("a function_call needs a string '") + key + "'");
        json& turn = assistant_turn(messages);
        if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
        turn["tool_calls"].push_back(json{{"id", item["call_id"]},
                                          {"type", "function"},
                                          {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
        return;
    }
    if (type == "function_call_output") {
        if (!item.contains("call_id") || !item["call_id"].is_string())
            bad_input(index, "a function_call_output needs a string 'call_id'");
        const json output = item.value("output", json(""));
        json content = output.is_array() ? chat_content(output, index) : output;
        if (!content.is_string() && !content.is_array())
            bad_input(index, "'output' must be a string or an array of parts");
        messages.push_back(json{{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", content}});
        return;
    }
    // Past reasoning is not shown to the model again (chat templates drop earlier thinking too).
    if (type == "reasoning") return;
    if (type == "item_reference")
        bad_input(index, "item_reference needs stored responses, which this server does not keep: send the items");
    bad_input(index, "cannot read an item of type '" + type + "' (messages, function_call, function_call_output)");
}

json chat_messages(const json& body) {
    const json* input = field(body, "input");
    if (input == nullptr) throw HttpError{400, "'input' is required", "input"};
    json messages = json::array();
    if (const json* instructions = field(body, "instructions")) {
        if (!instructions->is_string()) throw HttpError{400, "'instructions' must be a string", "instructions"};
        messages.push_back(json{{"role", "system"}, {"content", *instructions}});
    }
    if (input->is_string()) {
        messages.push_back(json{{"role", "user"}, {"content", *input}});
    } else if (input->is_array()) {
        for (size_t i = 0; i < input->size(); ++i) add_item(messages, (*input)[i], i);
    } else {
        throw HttpError{400, "'input' must be a string or an array of items", "input"};
    }
    return messages;
}

// Responses' flat function tools → chat tools. Other tool types (web_search, file_search, ...)
// are hosted by OpenAI and have no local meaning: skipped, as llama-server does.
json chat_tools(const json& tools) {
    if (!tools.is_array()) throw HttpError{400, "'tools' must be an array", "tools"};
    json out = json::array();
    for (const json& t : tools) {
        if (!t.is_object()) throw HttpError{400, "each tool must be an object", "tools"};
        if (t.value("type", "") != "function") continue;
        json fn = t;
        fn.erase("type");
        out.push_back(json{{"type", "function"}, {"function", fn}});
    }
    return out;
}

json chat_tool_choice(const json& choice) {
    if (choice.is_string()) return choice;
    if (choice.is_object() && choice.value("type", "") == "function" && choice.contains("name"))
        return json{{"type", "function"}, {"function", {{"name", choice["name"]}}}};
    throw HttpError{400, "'tool_choice' must be none, auto, required or {type: function, name}", "tool_choice"};
}

// text.format → response_format.
json chat_response_format(const json& text) {
    if (!text.is_object()) throw HttpError{400, "'text' must be an object", "text"};
    const json* format = field(text, "format");
    if (format == nullptr) return json();
    if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
        throw HttpError{400, "'text.format' must be an object with a string 'type'", "text.format"};
    const std::string type = (*format)["type"].get<std::string>();
    if (type == "text") return json();
    if (type == "json_object") return json{{"type", "json_object"}};
    if (type == "json_schema") {
        json schema = {{"name", format->value("name", "response")}, {"schema", format->value("schema", json())}};
        if (format->contains("strict")) schema["strict"] = (*format)["strict"];
        return json{{"type", "json_schema"}, {"json_schema", schema}};
    }
    throw HttpError{400, "'text.format.type' must be text, json_object or json_schema", "text.format"};
}

// Fields of the Responses API with no chat counterpart; the rest (temperature, top_p, stream,
// parallel_tool_calls and llama-server's sampling extras) pass through to the chat body unchanged.
// clang-format off
const char* const kResponsesOnly[] = {
    "input", "instructions", "tools", "tool_choice", "text", "max_output_tokens",  // translated
    "reasoning", "metadata",                                                         // echoed
    "store", "include", "truncation", "user", "top_logprobs", "service_tier",        // ignored
    "prompt_cache_key", "safety_identifier", "stream_options", "prompt", "max_tool_calls",
    "previous_response_id", "background", "conversation"};  // refused when set (chat_body_of)
// clang-format on

json chat_body_of(const json& body) {
    if (const json* prev = field(body, "previous_response_id");
        prev != nullptr && !(prev->is_string() && prev->get<std::string>().empty()))
        throw HttpError{400,
                        "'previous_response_id' is not supported: this server stores no responses (as llama-server); "
                        "send the whole conversation in 'input'",
                        "previous_response_id"};
    if (field(body, "conversation") != nullptr)
        throw HttpError{400, "'conversation' is not supported: this server stores no conversations", "conversation"};
    if (read_bool(body, "background", false))
        throw HttpError{400, "'background' is not supported: this server stores no responses to fetch later",
                        "background"};
    json chat = body;
    for (const char* key : kResponsesOnly) chat.erase(key);
    chat["messages"] = chat_messages(body);
    if (const json* tools = field(body, "tools")) chat["tools"] = chat_tools(*tools);
    if (const json* choice = field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*choice);
    if (const json* text = field(body, "text")) {
        const json format = chat_response_format(*text);
        if (!format.is_null()) chat["response_format"] = format;
    }
    if (const json* max = field(body, "max_output_tokens")) chat["max_tokens"] = *max;
    return chat;
}

// The chat request of a Responses body; errors name the Responses field.
ChatRequest read_responses_request(Server& server, const json& body) {
    const json chat = chat_body_of(body);
    try {
        return read_chat_request(server, chat);
    } catch (HttpError& e) {
        if (e.param == "messages") e.param = "input";
        if (e.param == "max_tokens") e.param = "max_output_tokens";
        if (e.param == "response_format") e.param = "text.format";
        throw;
    }
}

// --- response --------------------------------------------------------------------------------

class ResponsesFormatter final : public Formatter {
public:
    ResponsesFormatter(Server& server, const json& body, bool tools_offered, const std::string& prompt)
        : server_(server),
          reader_(server.backend().engine().tool_format(), prompt),
          tools_(tools_offered),
          id_(random_id("resp_")),
          message_id_(random_id("msg_")),
          created_(std::time(nullptr)),
          echo_(echoed_fields(server, body)) {}

    std::string content_type(bool stream) const override { return stream ? "text/event-stream" : "application/json"; }

    std::string stream_start() override {
        const json r = response(json::array(), "in_progress", json());
        std::string out = event("response.created", json{{"response", r}});
        return out += event("response.in_progress", json{{"response", r}});
    }

    std::string stream_piece(const std::string& piece, const std::vector<TokenInfo>&) override {
        if (tools_) return std::string();  // calls are parsed from the whole reply at the end
        return text_delta(reader_.stream(piece));
    }

    std::string stream_end(const Completion& c) override {
        std::string out;
        if (!tools_) out += text_delta(reader_.stream_end());
        const ParsedReply reply = reader_.parse(c.text, tools_);
        const bool cut = c.finish_reason == "length";
        if (message_index_ >= 0) out += close_message(cut);
        if (!reply.thinking.empty()) out += whole_item(reasoning_item(reply.thinking));
        if (message_index_ < 0 && (!reply.response.empty() || reply.function_calls.empty())) {
            out += text_delta(reply.response, true);
            out += close_message(cut);
        }
        for (const json& call : reply.function_calls) out += function_call(call);
        const json r = response(output_, cut ? "incomplete" : "completed", usage(c, reply));
        // OpenAI's event for a reply cut at max_output_tokens is response.incomplete (llama-server
        // sends response.completed either way); llama-server's timings ride on the last event.
        return out += event(cut ? "response.incomplete" : "response.completed",
                            json{{"response", r}, {"timings", llama_timings(c.stats)}});
    }

    std::string stream_error(int status, const std::string& message) override {
        return event("error", json{{"code", std::to_string(status)}, {"message", message}, {"param", nullptr}});
    }

    std::string whole(const Completion& c) override {
        const ParsedReply reply = reader_.parse(c.text, tools_);
        const bool cut = c.finish_reason == "length";
        json output = json::array();
        if (!reply.thinking.empty()) output.push_back(reasoning_item(reply.thinking));
        if (!reply.response.empty() || reply.function_calls.empty())
            output.push_back(message_item(reply.response, cut ? "incomplete" : "completed"));
        for (const json& call : reply.function_calls) output.push_back(call_item(call, "completed"));
        return dump(response(output, cut ? "incomplete" : "completed", usage(c, reply)));
    }

private:
    // Request fields a response object repeats back (OpenAI's Response object has them all).
    static json echoed_fields(Server& server, const json& body) {
        json e = {{"instructions", body.value("instructions", json())},
                  {"max_output_tokens", body.value("max_output_tokens", json())},
                  {"model", read_string(body, "model", server.config().alias)},
                  {"parallel_tool_calls", body.value("parallel_tool_calls", false)},
                  {"previous_response_id", nullptr},
                  {"reasoning", body.value("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
                  {"store", false},
                  {"temperature", body.value("temperature", json())},
                  {"text", body.value("text", json{{"format", {{"type", "text"}}}})},
                  {"tool_choice", body.value("tool_choice", json("auto"))},
                  {"tools", body.value("tools", json::array())},
                  {"top_p", body.value("top_p", json())},
                  {"truncation", "disabled"},
                  {"metadata", body.value("metadata", json::object())}};
        return e;
    }

    json response(const json& output, const char* status, const json& usage) const {
        json r = {{"id", id_},           {"object", "response"}, {"created_at", created_},       {"status", status},
                  {"background", false}, {"error", nullptr},     {"incomplete_details", nullptr}};
        if (std::string(status) == "incomplete") r["incomplete_details"] = json{{"reason", "max_output_tokens"}};
        r["completed_at"] =
            std::string(status) == "completed" ? json(static_cast<long long>(std::time(nullptr))) : json(nullptr);
        for (const auto& [key, value] : echo_.items()) r[key] = value;
        r["output"] = output;
        r["usage"] = usage;
        return r;
    }

    json usage(const Completion& c, const ParsedReply& reply) const {
        const size_t reasoning =
            reply.thinking.empty() ? 0
                                   : server_.backend().engine().tokenizer().encode(reply.thinking, false, false).size();
        return json{{"input_tokens", c.stats.prompt_tokens},
                    {"input_tokens_details", {{"cached_tokens", c.stats.cached_tokens}}},
                    {"output_tokens", c.stats.completion_tokens},
                    {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
                    {"total_tokens", c.stats.prompt_tokens + c.stats.completion_tokens}};
    }

    static json text_part(const std::string& text) {
        return json{
            {"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
    }

    json message_item(const std::string& text, const char* status) const {
        json content = status == std::string("in_progress") ? json::array() : json::array({text_part(text)});
        return json{
            {"id", message_id_}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", content}};
    }

    static json reasoning_item(const std::string& thinking) {
        return json{{"id", random_id("rs_")},
                    {"type", "reasoning"},
                    {"summary", json::array()},
                    {"content", json::array({json{{"type", "reasoning_text"}, {"text", thinking}}})},
                    {"status", "completed"}};
    }

    static json call_item(const json& call, const char* status) {
        return json{{"id", random_id("fc_")},
                    {"type", "function_call"},
                    {"status", status},
                    {"call_id", random_id("call_")},
                    {"name", call.value("name", "")},
                    {"arguments", dump(call.value("arguments", json::object()))}};
    }

    // One SSE event; every event carries its type and a sequence number, as OpenAI's do.
    std::string event(const char* type, json data) {
        json e = {{"type", type}, {"sequence_number", sequence_++}};
        for (const auto& [key, value] : data.items()) e[key] = value;
        return sse_event(type, e);
    }

    // Text of the message item, which opens at its first text (or at the end when forced).
    std::string text_delta(const std::string& text, bool open_empty = false) {
        if (text.empty() && !open_empty) return std::string();
        std::string out;
        if (message_index_ < 0) {
            message_index_ = static_cast<int>(n_items_++);
            out += event("response.output_item.added",
                         json{{"output_index", message_index_}, {"item", message_item("", "in_progress")}});
            out += event("response.content_part.added", json{{"item_id", message_id_},
                                                             {"output_index", message_index_},
                                                             {"content_index", 0},
                                                             {"part", text_part("")}});
        }
        if (text.empty()) return out;
        streamed_ += text;
        return out += event("response.output_text.delta", json{{"item_id", message_id_},
                                                               {"output_index", message_index_},
                                                               {"content_index", 0},
                                                               {"delta", text},
                                                               {"logprobs", json::array()}});
    }

    std::string close_message(bool cut) {
        const json where = {{"item_id", message_id_}, {"output_index", message_index_}, {"content_index", 0}};
        json done = where;
        done["text"] = streamed_;
        done["logprobs"] = json::array();
        json part = where;
        part["part"] = text_part(streamed_);
        const json item = message_item(streamed_, cut ? "incomplete" : "completed");
        output_.push_back(item);
        std::string out = event("response.output_text.done", done);
        out += event("response.content_part.done", part);
        return out += event("response.output_item.done", json{{"output_index", message_index_}, {"item", item}});
    }

    // An item known whole at the end (reasoning): added, then done.
    std::string whole_item(const json& item) {
        const size_t index = n_items_++;
        json added = item;
        added["status"] = "in_progress";
        added["content"] = json::array();
        output_.push_back(item);
        std::string out = event("response.output_item.added", json{{"output_index", index}, {"item", added}});
        return out += event("response.output_item.done", json{{"output_index", index}, {"item", item}});
    }

    std::string function_call(const json& call) {
        const size_t index = n_items_++;
        json item = call_item(call, "in_progress");
        const std::string arguments = item["arguments"];
        item["arguments"] = "";
        std::string out = event("response.output_item.added", json{{"output_index", index}, {"item", item}});
        const json where = {{"item_id", item["id"]}, {"output_index", index}};
        json delta = where;
        delta["delta"] = arguments;
        json done = where;
        done["name"] = item["name"];
        done["arguments"] = arguments;
        item["arguments"] = arguments;
        item["status"] = "completed";
        output_.push_back(item);
        out += event("response.function_call_arguments.delta", delta);
        out += event("response.function_call_arguments.done", done);
        return out += event("response.output_item.done", json{{"output_index", index}, {"item", item}});
    }

    Server& server_;
    ReplyReader reader_;
    bool tools_;
    std::string id_;
    std::string message_id_;
    long long created_;
    json echo_;
    // Streaming state.
    size_t sequence_ = 0;
    size_t n_items_ = 0;
    int message_index_ = -1;  // output index of the message item once opened
    std::string streamed_;    // the message's text so far
    json output_ = json::array();
};

void handle_responses(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    ChatRequest r = read_responses_request(server, body);
    auto f = std::make_shared<ResponsesFormatter>(server, body, !r.tools.empty(), r.prompt);
    std::vector<GenEvent> first;
    std::shared_ptr<Job> job = start_job(server, std::move(r.params), &first);
    respond(res, server, job, std::move(first), f, r.stream, HandoffPlan{});
}

void send_input_tokens(httplib::Response& res, const ChatRequest& r) {
    send_json(res, 200, json{{"object", "response.input_tokens"}, {"input_tokens", r.params.prompt.size()}});
}

}  // namespace

void install_responses(Server& server, httplib::Server& http, const Wrap& wrap) {
    Server* s = &server;
    const RawHandler responses =
        wrap([s](const httplib::Request& q, httplib::Response& r) { handle_responses(*s, q, r); });
    const RawHandler count = wrap([s](const httplib::Request& q, httplib::Response& r) {
        send_input_tokens(r, read_responses_request(*s, parse_body(q)));
    });
    const RawHandler count_chat = wrap([s](const httplib::Request& q, httplib::Response& r) {
        send_input_tokens(r, read_chat_request(*s, parse_body(q)));
    });
    for (const char* prefix : {"/v1", ""}) {
        const std::string p = prefix;
        http.Post(p + "/responses", responses);
        http.Post(p + "/responses/input_tokens", count);
        http.Post(p + "/chat/completions/input_tokens", count_chat);
    }
}

}  // namespace cactus::server
