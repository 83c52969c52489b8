#pragma once
// Per-family tool-call and thinking formats, chosen from the model's chat template text:
//   hermes  Qwen2.5 / Qwen3 / Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   lfm2    LFM2: <|tool_call_start|>[f(a="x", n=1), g()]<|tool_call_end|> (Python-call syntax)
//   gemma   FunctionGemma: <start_function_call>call:f{a:<escape>x<escape>,n:1}<end_function_call>
//   gemma4  Gemma 4: <|tool_call>call:f{a:<|"|>x<|"|>,n:1}<tool_call|>, thinking in
//           <|channel>thought\n...<channel|>
//   json    anything else: a bare or fenced JSON object {"name": ..., "arguments": {...}}
// Each format parses replies into typed calls, renders calls and results back into a conversation
// in the family's way (through the template), and describes its call syntax as a grammar
// (an xgrammar structural tag) for constrained decoding.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace cactus {

struct ParsedReply;

// A span of generated text that is never streamed as text: from `open` to `close` (inclusive).
// An empty `close` hides the marker `open` alone (a stray closing marker).
struct HiddenRegion {
    std::string open;
    std::string close;
};

class ToolFormat {
public:
    virtual ~ToolFormat() = default;
    virtual std::string name() const = 0;

    // Markers whose text streaming hides, with what lies between them (calls, thinking).
    virtual std::vector<HiddenRegion> hidden_regions() const = 0;
    // The thinking block as the model writes it (<think>...</think> unless the family differs).
    virtual HiddenRegion thinking_region() const { return {"<think>", "</think>"}; }
    // Moves the thinking out of a reply into `thinking` (trimmed). The default: a reply that opens
    // with the block thinks until its close; a reply holding a close with no open before it (the
    // prompt opened the block) thinks up to it, unless a call starts first. Markers later in the
    // reply (inside call arguments, say) are left alone.
    virtual void extract_thinking(std::string& text, std::string& thinking) const;
    // Special-token texts the detokenizer must show (not drop) so that the parser and the grammar
    // see them: the hidden regions' markers, and any the call syntax uses inside a call.
    virtual std::vector<std::string> shown_markers() const;
    // Moves the calls in `text` into `calls` ([{name, arguments}]) and removes them from text.
    virtual void extract_calls(std::string& text, nlohmann::ordered_json& calls) const = 0;
    // The call syntax of these tools as an xgrammar structural tag (JSON text). force: the reply
    // is one or more calls and nothing else; otherwise free text until the call marker (lazy).
    virtual std::string call_grammar(const nlohmann::ordered_json& tools, bool force) const = 0;
    // One assistant message's calls as the model writes them (for templates that only render
    // `content`, and for tests).
    virtual std::string render_calls(const nlohmann::ordered_json& calls) const = 0;
    // The conversation prepared for this family's template, as transformers' apply_chat_template
    // prepares it: a message's reasoning under any of its names (reasoning_content, thinking,
    // reasoning) is also given as `reasoning_content` and `thinking`; assistant tool_calls become
    // text where the template only renders content.
    virtual nlohmann::ordered_json prepare_messages(const nlohmann::ordered_json& messages) const;
    // The rendered prompt, finished where the family's template leaves it unable to generate
    // (Gemma 4 closes the model turn and opens none after a reply with text and tool results).
    virtual void finish_prompt(std::string& prompt, bool add_generation_prompt) const {
        (void)prompt;
        (void)add_generation_prompt;
    }

protected:
    bool template_renders_calls_ = true;  // the template reads message.tool_calls itself
    friend std::unique_ptr<ToolFormat> tool_format_for(const std::string&);
};

// The format a chat template's text asks for.
std::unique_ptr<ToolFormat> tool_format_for(const std::string& template_source);
std::unique_ptr<ToolFormat> make_hermes_format();
std::unique_ptr<ToolFormat> make_lfm2_format();
std::unique_ptr<ToolFormat> make_gemma_format();
std::unique_ptr<ToolFormat> make_gemma4_format();
// Gemma 4 for templates that do not scan role:tool messages themselves (the early large-model
// ones, without the E2B template's "OpenAI Chat Completions" scan): results are folded into the
// calling message's `tool_responses`.
std::unique_ptr<ToolFormat> make_gemma4_folded_format();
std::unique_ptr<ToolFormat> make_json_format();

// Helpers shared by the formats.
namespace tool_format {
// {name, arguments} from a tool-call object of any accepted spelling, or false.
bool as_call(const nlohmann::ordered_json& j, nlohmann::ordered_json& call);
// The tools' [{name, parameters}] with parameters defaulting to an empty object schema.
std::vector<std::pair<std::string, nlohmann::ordered_json>> tool_signatures(const nlohmann::ordered_json& tools);
std::string trim(const std::string& s);
// The calls of an OpenAI-style message (tool_calls[i].function) as [{name, arguments}].
nlohmann::ordered_json message_calls(const nlohmann::ordered_json& message);
// For each `open`...`close` span of text (an unterminated one runs to the end), calls
// read(body); spans it accepts are cut out of text, and so are unterminated ones it does not
// (replies cut off by max_tokens); closed ones it does not accept stay. Returns how many were accepted.
size_t cut_regions(std::string& text, const std::string& open, const std::string& close,
                   const std::function<bool(const std::string&)>& read);
// transformers' reasoning aliases (_alias_reasoning_fields): a message whose reasoning_content,
// thinking or reasoning (the first that is not null) is set gets it as `thinking` (unless it has
// one) and as `reasoning_content`.
nlohmann::ordered_json alias_reasoning(const nlohmann::ordered_json& message);
// JSON text parsed after a nesting check (model output is untrusted); discarded on failure.
nlohmann::ordered_json parse_bounded_json(const std::string& text);
// The JSON of a call's arguments as the tool's own schema shapes it: the tool signature wrapper
// {"type":"function", ...} accepted; parameters default to an object schema.
nlohmann::ordered_json call_schema(const nlohmann::ordered_json& parameters);
}  // namespace tool_format

}  // namespace cactus
