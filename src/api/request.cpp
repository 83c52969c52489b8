#include "api/request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "chat/json_parse.h"
#include "core/error.h"
#include "engine/model_store.h"

namespace cactus::api {

using json = nlohmann::ordered_json;

namespace {

// --- typed option readers -----------------------------------------------------------------------

bool read_bool(const json& v, const std::string& key) {
    if (!v.is_boolean()) fail("options: '%s' must be true or false", key.c_str());
    return v.get<bool>();
}

double read_number(const json& v, const std::string& key, double lo, double hi) {
    if (!v.is_number()) fail("options: '%s' must be a number", key.c_str());
    double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi)
        fail("options: '%s' must be between %g and %g (got %g)", key.c_str(), lo, hi, d);
    return d;
}

int64_t read_int(const json& v, const std::string& key, int64_t lo, int64_t hi) {
    if (v.is_number_float()) {
        double d = v.get<double>();
        if (std::floor(d) != d) fail("options: '%s' must be a whole number (got %g)", key.c_str(), d);
    } else if (!v.is_number_integer()) {
        fail("options: '%s' must be a whole number", key.c_str());
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
        fail("options: '%s' must be between %lld and %lld", key.c_str(), (long long)lo, (long long)hi);
    double d = v.get<double>();
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
        fail("options: '%s' must be between %lld and %lld (got %.0f)", key.c_str(), (long long)lo, (long long)hi, d);
    return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
}

std::string read_string(const json& v, const std::string& key) {
    if (!v.is_string()) fail("options: '%s' must be a string", key.c_str());
    return v.get<std::string>();
}

// spec_type: ours ("draft", "ngram", "off") or llama.cpp's --spec-type spellings.
SpecType read_spec_type(const json& v, const std::string& key) {
    const std::string name = read_string(v, key);
    try {
        return parse_spec_type(name);
    } catch (const Error& e) {
        fail("options: %s", e.what());
    }
}

std::vector<std::string> read_string_list(const json& v, const std::string& key) {
    if (!v.is_array()) fail("options: '%s' must be an array of strings", key.c_str());
    std::vector<std::string> out;
    for (const json& s : v) {
        if (!s.is_string()) fail("options: '%s' must be an array of strings", key.c_str());
        out.push_back(s.get<std::string>());
    }
    return out;
}

// OpenAI's response_format: {"type":"text"}, {"type":"json_object"} or
// {"type":"json_schema","json_schema":{"name":...,"schema":{...},"strict":...}}. Returns null for text.
json read_response_format(const json& v) {
    if (v.is_null()) return json();
    if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
        fail("options: 'response_format' must be an object with a string 'type'");
    std::string type = v["type"].get<std::string>();
    if (type == "text") return json();
    if (type == "json_object") return v;
    if (type != "json_schema")
        fail("options: response_format.type must be text, json_object or json_schema (got '%s')", type.c_str());
    if (!v.contains("json_schema") || !v["json_schema"].is_object())
        fail("options: response_format.json_schema must be an object {name, schema, strict}");
    const json& js = v["json_schema"];
    if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
        fail("options: response_format.json_schema.schema must be a JSON schema object");
    return v;
}

// Most tokens drafted per step: verifying more costs a longer step than the tokens it could save
// (llama.cpp's servers cap --draft-max the same way).
constexpr int64_t kMaxDraft = 64;

using OptionSetter = std::function<void(ApiOptions&, const json&, const std::string&)>;

const std::map<std::string, OptionSetter>& option_table() {
    static const std::map<std::string, OptionSetter> table = {
        {"max_tokens",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.generation.max_tokens = static_cast<size_t>(read_int(v, k, 1, 1 << 20));
         }},
        {"temperature",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.generation.sampling.temperature = static_cast<float>(read_number(v, k, 0.0, 100.0));
         }},
        {"top_p",
         [](ApiOptions& o, const json& v, const std::string& k) {
             double p = read_number(v, k, 0.0, 1.0);
             o.generation.sampling.top_p = p == 0.0 ? 1.0f : static_cast<float>(p);
         }},
        {"top_k",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.generation.sampling.top_k = static_cast<int>(read_int(v, k, 0, 1 << 24));
         }},
        {"min_p",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.generation.sampling.min_p = static_cast<float>(read_number(v, k, 0.0, 0.9999));
         }},
        {"repetition_penalty",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.generation.sampling.repetition_penalty = static_cast<float>(read_number(v, k, 0.01, 100.0));
         }},
        {"seed",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.generation.sampling.seed = static_cast<uint64_t>(read_int(v, k, 0, std::numeric_limits<int64_t>::max()));
         }},
        {"stop_sequences", [](ApiOptions& o, const json& v,
                              const std::string& k) { o.generation.stop_sequences = read_string_list(v, k); }},
        {"include_stop_sequences", [](ApiOptions& o, const json& v,
                                      const std::string& k) { o.generation.include_stop_sequences = read_bool(v, k); }},
        {"ignore_eos",
         [](ApiOptions& o, const json& v, const std::string& k) { o.generation.ignore_eos = read_bool(v, k); }},
        {"force_tools", [](ApiOptions& o, const json& v, const std::string& k) { o.force_tools = read_bool(v, k); }},
        {"parallel_tool_calls",
         [](ApiOptions& o, const json& v, const std::string& k) { o.parallel_tool_calls = read_bool(v, k); }},
        {"constrain_tool_calls",
         [](ApiOptions& o, const json& v, const std::string& k) { o.constrain_tool_calls = read_bool(v, k); }},
        {"response_format",
         [](ApiOptions& o, const json& v, const std::string& k) { o.response_format = read_response_format(v); }},
        {"tool_rag_top_k",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.tool_rag_top_k = static_cast<int>(read_int(v, k, 0, 1 << 20));
         }},
        {"enable_thinking_if_supported",
         [](ApiOptions& o, const json& v, const std::string& k) { o.enable_thinking = read_bool(v, k); }},
        {"auto_handoff", [](ApiOptions& o, const json& v, const std::string& k) { o.auto_handoff = read_bool(v, k); }},
        {"confidence_threshold", [](ApiOptions& o, const json& v,
                                    const std::string& k) { o.confidence_threshold = read_number(v, k, 0.0, 1.0); }},
        {"cloud_timeout_ms",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.cloud_timeout_ms = static_cast<int>(read_int(v, k, 1, 600000));
         }},
        {"handoff_with_images",
         [](ApiOptions& o, const json& v, const std::string& k) { o.handoff_with_images = read_bool(v, k); }},
        {"timestamps", [](ApiOptions& o, const json& v, const std::string& k) { o.timestamps = read_bool(v, k); }},
        {"language", [](ApiOptions& o, const json& v, const std::string& k) { o.language = read_string(v, k); }},
        {"n_ctx", [](ApiOptions& o, const json& v,
                     const std::string& k) { o.context.n_ctx = static_cast<size_t>(read_int(v, k, 16, 1 << 20)); }},
        {"prefill_chunk",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.context.prefill_chunk = static_cast<size_t>(read_int(v, k, 1, 65536));
         }},
        {"kv_cache_type",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.context.kv.type = static_cast<int>(parse_kv_type(read_string(v, k)));
         }},
        {"kv_compress",
         [](ApiOptions& o, const json& v, const std::string& k) { o.context.kv.compress = read_bool(v, k) ? 1 : 0; }},
        {"kv_compress_at",
         [](ApiOptions& o, const json& v, const std::string& k) {
             o.context.kv.compress_at = static_cast<size_t>(read_int(v, k, 2, 1 << 20));
         }},
        {"kv_compress_to",
         [](ApiOptions& o, const json& v,
            const std::string& k) { o.context.kv.compress_to = static_cast<size_t>(read_int(v, k, 1, 1 << 20)); }},
        {"kv_compress_sinks", [](ApiOptions& o, const json& v,
                                 const std::string& k) { o.context.kv.compress_sinks = read_int(v, k, 0, 1 << 20); }},
        {"kv_compress_recent",
         [](ApiOptions& o, const json& v,
            const std::string& k) { o.context.kv.compress_recent = read_number(v, k, 0.0, 1.0); }},
        {"spec_type", [](ApiOptions& o, const json& v, const std::string& k) { o.spec.type = read_spec_type(v, k); }},
        {"draft_model",
         [](ApiOptions& o, const json& v, const std::string& k) { o.spec.draft_model = read_string(v, k); }},
        {"draft_max",
         [](ApiOptions& o, const json& v,
            const std::string& k) { o.spec.draft_max = static_cast<size_t>(read_int(v, k, 1, kMaxDraft)); }},
        {"draft_min",
         [](ApiOptions& o, const json& v,
            const std::string& k) { o.spec.draft_min = static_cast<size_t>(read_int(v, k, 1, kMaxDraft)); }},
    };
    return table;
}

// --- messages -----------------------------------------------------------------------------------

const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};

void check_content_parts(const json& parts, size_t index) {
    for (const json& part : parts) {
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
            fail("messages[%zu]: each content part must be an object with a string 'type'", index);
        std::string type = part["type"].get<std::string>();
        if (type == "text") {
            if (!part.contains("text") || !part["text"].is_string())
                fail("messages[%zu]: a text content part needs a string 'text'", index);
        } else if (type != "image_url" && type != "image" && type != "input_audio" && type != "audio") {
            fail("messages[%zu]: unknown content part type '%s'", index, type.c_str());
        }
    }
}

// OpenAI's {type:"image_url", image_url:{url}} parts with a local path or file:// URL join the
// message's "images" (after those given there) and leave the content; the text parts that remain
// become the content string. Remote and data: URLs are errors.
void move_image_parts(json& m, size_t index) {
    // (m is an ordered_json: adding a key may move its values, so no reference into m is kept)
    const json parts = m["content"];
    json kept = json::array();
    std::vector<std::string> paths;
    for (const json& part : parts) {
        if (part["type"] != "image_url") {
            kept.push_back(part);
            continue;
        }
        const json& ref = part.contains("image_url") ? part["image_url"] : json();
        const json& url = ref.is_object() && ref.contains("url") ? ref["url"] : ref;
        if (!url.is_string()) fail("messages[%zu]: an image_url part needs image_url.url (a string)", index);
        std::string path = url.get<std::string>();
        if (path.rfind("file://", 0) == 0) path = path.substr(7);
        if (path.rfind("data:", 0) == 0 || path.find("://") != std::string::npos)
            fail("messages[%zu]: image_url: only local paths and file:// URLs are supported (got '%.40s')", index,
                 path.c_str());
        paths.push_back(path);
    }
    if (paths.empty()) return;
    if (!m.contains("images")) m["images"] = json::array();
    if (!m["images"].is_array()) fail("messages[%zu]: 'images' must be an array of paths", index);
    for (const std::string& path : paths) m["images"].push_back(path);
    std::string text;
    for (const json& part : kept) {
        if (part["type"] != "text") {
            m["content"] = kept;
            return;
        }
        text += part["text"].get<std::string>();
    }
    m["content"] = text;
}

void normalize_tool_calls(json& message, size_t index) {
    json& calls = message["tool_calls"];
    if (!calls.is_array()) fail("messages[%zu]: 'tool_calls' must be an array", index);
    for (json& call : calls) {
        if (!call.is_object()) fail("messages[%zu]: each tool call must be an object", index);
        json* fn = call.contains("function") ? &call["function"] : &call;
        if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
            fail("messages[%zu]: a tool call needs function.name (a string)", index);
        if (!fn->contains("arguments")) (*fn)["arguments"] = json::object();
        json& args = (*fn)["arguments"];
        if (args.is_string()) {
            // Same limits as the request itself; text that breaks them stays a string.
            json parsed;
            if (try_parse_json(args.get_ref<const std::string&>(), parsed) && parsed.is_object()) args = parsed;
        }
        if (!call.contains("function")) call = json{{"type", "function"}, {"function", *fn}};
        if (!call.contains("type")) call["type"] = "function";
    }
}

void check_message(json& m, size_t index) {
    if (!m.is_object()) fail("messages[%zu] must be an object", index);
    if (!m.contains("role") || !m["role"].is_string()) fail("messages[%zu]: 'role' must be a string", index);
    std::string role = m["role"].get<std::string>();
    if (kRoles.count(role) == 0)
        fail("messages[%zu]: unknown role '%s' (use system, developer, user, assistant or tool)", index, role.c_str());
    bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (!m.contains("content") || m["content"].is_null()) {
        if (!(role == "assistant" && has_calls)) fail("messages[%zu]: 'content' is missing", index);
        m["content"] = "";
    } else if (m["content"].is_array()) {
        check_content_parts(m["content"], index);
        move_image_parts(m, index);
    } else if (!m["content"].is_string()) {
        fail("messages[%zu]: 'content' must be a string or an array of content parts", index);
    }
    if (has_calls) normalize_tool_calls(m, index);
    if (m.contains("name") && !m["name"].is_string()) fail("messages[%zu]: 'name' must be a string", index);
    for (const char* media : {"images", "audio"}) {
        if (!m.contains(media)) continue;
        if (!m[media].is_array()) fail("messages[%zu]: '%s' must be an array of paths", index, media);
        for (const json& p : m[media])
            if (!p.is_string()) fail("messages[%zu]: '%s' must be an array of paths", index, media);
    }
}

// --- tool relevance ------------------------------------------------------------------------------

std::set<std::string> words_of(const std::string& text) {
    std::set<std::string> words;
    std::string w;
    for (char c : text) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else {
            if (w.size() > 2) words.insert(w);
            w.clear();
        }
    }
    if (w.size() > 2) words.insert(w);
    return words;
}

std::string last_user_text(const json& messages) {
    for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
        if ((*it)["role"] != "user") continue;
        const json& c = (*it)["content"];
        if (c.is_string()) return c.get<std::string>();
        std::string text;
        for (const json& part : c)
            if (part["type"] == "text") text += part["text"].get<std::string>() + " ";
        return text;
    }
    return std::string();
}

}  // namespace

json parse_json_text(const char* text, const char* what) {
    if (text == nullptr) fail("%s is NULL", what);
    return parse_json(text, text + std::strlen(text), what);
}

ApiOptions parse_options(const char* options_json) {
    ApiOptions options;
    options.generation.max_tokens = 100;
    options.generation.sampling.min_p = 0.15f;
    options.generation.sampling.repetition_penalty = 1.1f;
    if (options_json == nullptr || options_json[0] == '\0') return options;
    json parsed = parse_json_text(options_json, "options_json");
    if (parsed.is_null()) return options;
    if (!parsed.is_object()) fail("options_json must be a JSON object");
    const auto& table = option_table();
    for (auto it = parsed.begin(); it != parsed.end(); ++it) {
        auto setter = table.find(it.key());
        if (setter == table.end()) fail("options: unknown key '%s' (docs/API.md lists them)", it.key().c_str());
        setter->second(options, it.value(), it.key());
    }
    return options;
}

SpecOptions speculative_options(const SpecOptions& current, const SpecRequest& request) {
    SpecOptions spec = current;
    if (request.draft_model) {
        try {
            spec.draft_model = request.draft_model->empty() ? "" : resolve_model_path(*request.draft_model);
        } catch (const Error& e) {
            fail("options: 'draft_model': %s", e.what());
        }
    }
    if (request.type) {
        spec.type = *request.type;
    } else if (request.draft_model && !request.draft_model->empty()) {
        spec.type = SpecType::draft;  // a draft model asks for drafting with it
    }
    if (spec.type == SpecType::draft && spec.draft_model.empty())
        fail("options: 'spec_type' \"draft\" needs 'draft_model' (a .gguf path or a known model name)");
    // spec_type wins over a draft model given beside it (a call may override a default draft model
    // with "ngram" or "off"); an unused draft model is not kept loaded.
    if (spec.type != SpecType::draft) spec.draft_model.clear();
    if (request.draft_max) spec.draft_max = *request.draft_max;
    if (request.draft_min) spec.draft_min = *request.draft_min;
    if (spec.draft_min > spec.draft_max)
        fail("options: 'draft_min' (%zu) is above 'draft_max' (%zu)", spec.draft_min, spec.draft_max);
    return spec;
}

json parse_messages(const char* messages_json) {
    json messages = parse_json_text(messages_json, "messages_json");
    if (!messages.is_array()) fail("messages_json must be a JSON array of messages");
    if (messages.empty()) fail("messages_json is empty: give at least one message");
    for (size_t i = 0; i < messages.size(); ++i) check_message(messages[i], i);
    return messages;
}

json parse_tools(const char* tools_json) {
    if (tools_json == nullptr || tools_json[0] == '\0') return json::array();
    json tools = parse_json_text(tools_json, "tools_json");
    if (tools.is_null()) return json::array();
    if (!tools.is_array()) fail("tools_json must be a JSON array");
    for (size_t i = 0; i < tools.size(); ++i) {
        json& t = tools[i];
        if (!t.is_object()) fail("tools[%zu] must be an object", i);
        if (!t.contains("function") && t.contains("name")) t = json{{"type", "function"}, {"function", t}};
        if (!t.contains("function") || !t["function"].is_object()) fail("tools[%zu]: 'function' must be an object", i);
        const json& fn = t["function"];
        if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
            fail("tools[%zu]: function.name must be a non-empty string", i);
        if (fn.contains("description") && !fn["description"].is_string())
            fail("tools[%zu]: function.description must be a string", i);
        if (fn.contains("parameters") && !fn["parameters"].is_object())
            fail("tools[%zu]: function.parameters must be a JSON schema object", i);
        if (!t.contains("type")) t["type"] = "function";
    }
    return tools;
}

json select_tools(const json& tools, const json& messages, int k) {
    if (k <= 0 || tools.size() <= static_cast<size_t>(k)) return tools;
    std::set<std::string> query = words_of(last_user_text(messages));
    std::vector<std::pair<int, size_t>> scored;  // (-overlap, index): stable by original order
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& fn = tools[i]["function"];
        std::string text = fn["name"].get<std::string>() + " " + fn.value("description", std::string());
        int overlap = 0;
        for (const std::string& w : words_of(text)) overlap += static_cast<int>(query.count(w));
        scored.push_back({-overlap, i});
    }
    std::stable_sort(scored.begin(), scored.end());
    std::vector<size_t> keep;
    for (int i = 0; i < k; ++i) keep.push_back(scored[static_cast<size_t>(i)].second);
    std::sort(keep.begin(), keep.end());
    json out = json::array();
    for (size_t i : keep) out.push_back(tools[i]);
    return out;
}

json parse_response_format(const json& value) { return read_response_format(value); }

}  // namespace cactus::api
