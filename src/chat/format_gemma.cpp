// Gemma-family tool calls: one block per call, "call:NAME{key:value,...}" inside (call_syntax.h).
//   FunctionGemma (Gemma 3 270M): <start_function_call>call:f{a:<escape>x<escape>,n:1}<end_function_call>
//   Gemma 4: <|tool_call>call:f{a:<|"|>x<|"|>,n:1}<tool_call|>; thinking in
//            <|channel>thought\n...<channel|>; after its calls the model emits <|tool_response>,
//            an end-of-generation token, and the app's results continue the same model turn.
#include <algorithm>
#include <cctype>

#include "chat/call_syntax.h"
#include "chat/json_parse.h"
#include "chat/tool_format.h"

namespace cactus {

using json = nlohmann::ordered_json;

namespace {

json structural_tag(const json& tags, const std::string& trigger, bool force) {
    json format = force
                      ? json{{"type", "tags_with_separator"}, {"tags", tags}, {"separator", ""}, {"at_least_one", true}}
                      : json{{"type", "triggered_tags"}, {"triggers", json::array({trigger})}, {"tags", tags}};
    return json{{"type", "structural_tag"}, {"format", format}}.dump();
}

class GemmaCallFormat : public ToolFormat {
public:
    GemmaCallFormat(std::string name, std::string open, std::string close, CallSyntax syntax)
        : name_(std::move(name)), open_(std::move(open)), close_(std::move(close)), syntax_(syntax) {}

    std::string name() const override { return name_; }

    std::vector<HiddenRegion> hidden_regions() const override { return {{open_, close_}, thinking_region()}; }

    // Each block is read by the call syntax itself, which knows where "call:name{...}" ends, so
    // a string argument holding the close marker's text does not end it early. A block that does
    // not read stays text, up to its first close marker.
    void extract_calls(std::string& text, json& calls) const override {
        std::string kept;
        size_t pos = 0;
        for (size_t start = text.find(open_); start != std::string::npos; start = text.find(open_, pos)) {
            kept += text.substr(pos, start - pos);
            const size_t end = read_block(text, start, calls);
            if (end != std::string::npos) {
                pos = end;
                continue;
            }
            // Unreadable: a closed block stays as text; one cut off before its close marker (max_tokens)
            // leaves, as it never reached the stream (tool_format::cut_regions does the same).
            const size_t close = text.find(close_, start + open_.size());
            pos = close == std::string::npos ? text.size() : close + close_.size();
            if (close != std::string::npos) kept += text.substr(start, pos - start);
        }
        if (pos < text.size()) kept += text.substr(pos);
        text = kept;
    }

    // One tag for all tools: the grammar of "name{...}" after "call:" (call_grammar.cpp).
    std::string call_grammar(const json& tools, bool force) const override {
        json tag = {{"type", "tag"},
                    {"begin", open_ + "call:"},
                    {"content", json{{"type", "grammar"}, {"grammar", calls_ebnf(tools, syntax_)}}},
                    {"end", close_}};
        return structural_tag(json::array({tag}), open_, force);
    }

    std::string render_calls(const json& calls) const override {
        std::string out;
        for (const json& c : calls) out += open_ + write_call(c, syntax_) + close_;
        return out;
    }

protected:
    // The call block at text[start] (its open marker): appends the call and returns the offset
    // past the close marker (or past the end, for a reply cut off after the call), else npos.
    size_t read_block(const std::string& text, size_t start, json& calls) const {
        json found = json::array();
        size_t end = read_gemma_call_at(text, start + open_.size(), found, syntax_);
        if (end == std::string::npos) return end;
        end = std::min(text.find_first_not_of(" \t\r\n", end), text.size());
        if (text.compare(end, close_.size(), close_) == 0)
            end += close_.size();
        else if (end != text.size())
            return std::string::npos;
        calls.push_back(found[0]);
        return end;
    }

    std::string name_, open_, close_;
    CallSyntax syntax_;
};

const std::string kChannelOpen = "<|channel>", kChannelClose = "<channel|>", kThoughtLabel = "thought";

class Gemma4Format : public GemmaCallFormat {
public:
    explicit Gemma4Format(bool template_reads_tool_messages)
        : GemmaCallFormat("gemma4", "<|tool_call>", "<tool_call|>", CallSyntax::gemma4),
          fold_tool_results_(!template_reads_tool_messages) {}

    // The model may close a channel it never opened (llama.cpp's parser notes a trailing
    // <channel|>): that marker alone is hidden too.
    std::vector<HiddenRegion> hidden_regions() const override {
        return {{open_, close_}, {kChannelOpen, kChannelClose}, {kChannelClose, ""}};
    }

    HiddenRegion thinking_region() const override { return {kChannelOpen, kChannelClose}; }

    // Every <|channel>...<channel|> block outside the calls is thinking (its "thought" label
    // dropped); an unterminated block thinks to the end; a stray <channel|> is dropped. A prompt
    // that opened the block is handled by the caller, which puts the open marker first.
    void extract_thinking(std::string& text, std::string& thinking) const override {
        std::string kept, thought;
        size_t pos = 0;
        while (pos < text.size()) {
            const size_t open = text.find(kChannelOpen, pos), close = text.find(kChannelClose, pos),
                         call = text.find(open_, pos);
            const size_t next = std::min({open, close, call});
            if (next == std::string::npos) break;
            kept += text.substr(pos, next - pos);
            if (next == call) {  // a call is kept whole: its strings may hold the markers' text
                json ignored = json::array();
                size_t end = read_block(text, next, ignored);
                if (end == std::string::npos) {
                    end = text.find(close_, next);
                    end = end == std::string::npos ? text.size() : end + close_.size();
                }
                pos = end;
                kept += text.substr(next, pos - next);
            } else if (next == open) {
                const size_t body = next + kChannelOpen.size();
                const size_t end = text.find(kChannelClose, body);
                std::string block = text.substr(body, (end == std::string::npos ? text.size() : end) - body);
                while (block.compare(0, kChannelOpen.size(), kChannelOpen) == 0) block.erase(0, kChannelOpen.size());
                if (block.compare(0, kThoughtLabel.size(), kThoughtLabel) == 0 &&
                    (block.size() == kThoughtLabel.size() ||
                     std::isspace(static_cast<unsigned char>(block[kThoughtLabel.size()]))))
                    block.erase(0, kThoughtLabel.size());
                block = tool_format::trim(block);
                if (!block.empty()) thought += (thought.empty() ? "" : "\n") + block;
                pos = end == std::string::npos ? text.size() : end + kChannelClose.size();
            } else {
                pos = next + kChannelClose.size();
            }
        }
        if (pos < text.size()) kept += text.substr(pos);
        text = kept;
        thinking = thought;
    }

    std::vector<std::string> shown_markers() const override {
        std::vector<std::string> markers = ToolFormat::shown_markers();
        markers.push_back(string_delimiter(syntax_));
        return markers;
    }

    // One tag per tool, its arguments constrained by xgrammar's JSON Schema converter in the
    // "gemma" style (bare keys, <|"|> strings): the whole schema language, not a subset. Strings
    // exclude the close marker, so streaming (which hides up to the first one) sees the call
    // whole; the style drops string length limits either way. The template writes no whitespace
    // inside a call: one character at most between items keeps a weak model from filling a call
    // with Gemma's many whitespace tokens (seen on random weights: 40 tokens of newlines).
    std::string call_grammar(const json& tools, bool force) const override {
        json tags = json::array();
        for (const auto& sig : tool_format::tool_signatures(tools)) {
            tags.push_back(json{{"type", "tag"},
                                {"begin", open_ + "call:" + sig.first},
                                {"content", json{{"type", "json_schema"},
                                                 {"json_schema", sig.second},
                                                 {"style", "gemma"},
                                                 {"max_whitespace_cnt", 1},
                                                 {"excludes", json::array({close_})}}},
                                {"end", close_}});
        }
        return structural_tag(tags, open_, force);
    }

    // The template raises on arguments given as a string (it wants a mapping), as transformers
    // callers are told to deserialize them first: JSON-object strings become objects here.
    // Templates without the scan of role:tool messages (the early large-model ones) get the
    // results folded into the calling message's `tool_responses`, as llama.cpp does for them.
    json prepare_messages(const json& messages) const override {
        json out = ToolFormat::prepare_messages(messages);
        parse_string_arguments(out);
        return fold_tool_results_ ? fold_tool_results(out) : out;
    }

    // After an assistant message with text, calls and their results, the template closes the
    // model turn (<turn|>\n, then <|channel>thought\n with thinking on) and opens no new one:
    // the model turn is opened here, as llama.cpp's Gemma 4 handler does.
    void finish_prompt(std::string& prompt, bool add_generation_prompt) const override {
        if (!add_generation_prompt) return;
        const std::string closed = "<turn|>\n", thought = kChannelOpen + kThoughtLabel + "\n";
        auto ends_with = [&](const std::string& tail) {
            return prompt.size() >= tail.size() && prompt.compare(prompt.size() - tail.size(), tail.size(), tail) == 0;
        };
        if (ends_with(closed + thought)) prompt.resize(prompt.size() - thought.size());
        if (ends_with(closed)) prompt += "<|turn>model\n";
    }

private:
    static std::string role_of(const json& m) {
        return m.is_object() && m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
    }
    static bool has_calls(const json& m) {
        return role_of(m) == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array() &&
               !m["tool_calls"].empty();
    }

    static void parse_string_arguments(json& messages) {
        for (json& m : messages) {
            if (!has_calls(m)) continue;
            for (json& call : m["tool_calls"]) {
                if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
                json& fn = call["function"];
                if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
                json parsed;
                if (try_parse_json(fn["arguments"].get<std::string>(), parsed) && parsed.is_object())
                    fn["arguments"] = parsed;
            }
        }
    }

    // {name, response} of a role:tool message answering one of `calls`: the name of the call with
    // its tool_call_id, else of the call at the same position, else the message's own name; the
    // response is its content parsed as JSON where it is JSON, else the text.
    static std::string call_name(const json& call) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) return "";
        const json& fn = call["function"];
        return fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "";
    }

    static json tool_response(const json& calls, const json& result, size_t position) {
        std::string name;
        const json id = result.value("tool_call_id", json());
        for (const json& c : calls)
            if (name.empty() && !id.is_null() && c.is_object() && c.value("id", json()) == id) name = call_name(c);
        if (name.empty() && position < calls.size()) name = call_name(calls[position]);
        if (name.empty() && result.contains("name") && result["name"].is_string()) name = result["name"];
        std::string text;
        const json content = result.value("content", json());
        if (content.is_string()) {
            text = content.get<std::string>();
        } else if (content.is_array()) {
            for (const json& part : content)
                if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
                    part["text"].is_string())
                    text += part["text"].get<std::string>();
        }
        json response;
        if (!try_parse_json(text, response)) response = text;
        return json{{"name", name.empty() ? "unknown" : name}, {"response", response}};
    }

    // assistant(calls) + its role:tool results (+ the answer after them) -> one assistant message
    // with tool_calls, tool_responses and the answer as content (or its own content when none).
    static json fold_tool_results(const json& messages) {
        json out = json::array();
        for (size_t i = 0; i < messages.size();) {
            if (!has_calls(messages[i])) {
                out.push_back(messages[i++]);
                continue;
            }
            json merged = messages[i];
            json responses = json::array();
            size_t k = i + 1;
            for (; k < messages.size() && role_of(messages[k]) == "tool"; ++k)
                responses.push_back(tool_response(merged["tool_calls"], messages[k], responses.size()));
            if (!responses.empty()) merged["tool_responses"] = responses;
            if (k < messages.size() && role_of(messages[k]) == "assistant" && !has_calls(messages[k]) &&
                messages[k].contains("content") && !messages[k]["content"].is_null() && !messages[k]["content"].empty())
                merged["content"] = messages[k++]["content"];
            out.push_back(merged);
            i = k;
        }
        return out;
    }

    bool fold_tool_results_;
};

}  // namespace

std::unique_ptr<ToolFormat> make_gemma_format() {
    return std::make_unique<GemmaCallFormat>("gemma", "<start_function_call>", "<end_function_call>",
                                             CallSyntax::gemma);
}

std::unique_ptr<ToolFormat> make_gemma4_format() { return std::make_unique<Gemma4Format>(true); }

std::unique_ptr<ToolFormat> make_gemma4_folded_format() { return std::make_unique<Gemma4Format>(false); }

}  // namespace cactus
