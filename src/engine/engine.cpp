#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backends/backend.h"
#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "chat/tool_format.h"
#include "core/error.h"
#include "engine/media/media_prompt.h"
#include "engine/speculative.h"
#include "engine/text_stream.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "models/audio/gemma4_audio.h"
#include "models/vision/vision_encoder.h"
#include "sampling/grammar.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string special_text(const Tokenizer& tok, int32_t id) {
    if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) return std::string();
    return tok.token_text(id);
}

void finish_metrics(CompletionMetrics& m, Clock::time_point start, Clock::time_point first, bool have_first,
                    Clock::time_point end) {
    m.total_time_ms = ms_between(start, end);
    m.time_to_first_token_ms = have_first ? ms_between(start, first) : m.total_time_ms;
    double ttft_s = m.time_to_first_token_ms / 1000.0;
    m.prefill_tps = (m.prefill_tokens > 0 && ttft_s > 0.0) ? m.prefill_tokens / ttft_s : 0.0;
    double decode_s = (m.total_time_ms - m.time_to_first_token_ms) / 1000.0;
    m.decode_tps = (m.decode_tokens > 1 && decode_s > 0.0) ? (m.decode_tokens - 1) / decode_s : 0.0;
}

// Control tokens whose text is one of the format's markers (<|tool_call_start|>, Gemma 4's <|"|>,
// ...): the detokenizer shows them so the output parser and the grammar see the markers.
std::vector<bool> marker_tokens(const Tokenizer& tok, const ToolFormat& format) {
    std::vector<bool> shown(tok.vocab_size(), false);
    for (const std::string& marker : format.shown_markers()) {
        std::vector<int32_t> ids = tok.encode(marker, /*add_special=*/false, /*parse_special=*/true);
        if (ids.size() == 1 && tok.is_control(ids[0])) shown[static_cast<size_t>(ids[0])] = true;
    }
    return shown;
}

// Each path of a message's "images" becomes a kImageMarker before its text (the engine splices the
// image in there: complete_with_images). typed: every content becomes an array of text parts, the
// markers a part of their own (templates that iterate content parts, e.g. SmolVLM's; llama.cpp's
// server puts its marker into such a part too).
// The text parts of a content array, joined, for templates that take a string only. Other parts
// never reach here as parts (images are "images" paths by now), so one is an error naming it.
std::string joined_text_parts(const nlohmann::ordered_json& parts) {
    std::string text;
    for (const nlohmann::ordered_json& part : parts) {
        const std::string type = part.is_object() ? part.value("type", std::string("text")) : std::string();
        if (type != "text" || !part.contains("text") || !part["text"].is_string())
            fail(
                "render_chat: a content part of type '%s' cannot be shown by this model's chat template (text "
                "parts only)",
                type.c_str());
        text += part["text"].get<std::string>();
    }
    return text;
}

// The messages as the template takes them: each message's "images" become kImageMarker text before
// its content, then its "audio" kAudioMarker text; `typed`: contents as arrays of parts (templates that render only those); `join`:
// content arrays joined into one string (templates that cannot render arrays).
nlohmann::ordered_json with_image_markers(const nlohmann::ordered_json& messages, bool typed, bool join) {
    using json = nlohmann::ordered_json;
    json out = messages;
    for (json& m : out) {
        if (!m.is_object()) continue;
        std::string markers;
        if (m.contains("images") && m["images"].is_array())
            for (size_t i = 0; i < m["images"].size(); ++i) markers += kImageMarker;
        if (m.contains("audio") && m["audio"].is_array())
            for (size_t i = 0; i < m["audio"].size(); ++i) markers += kAudioMarker;
        m.erase("images");
        m.erase("audio");
        json& content = m["content"];
        if (typed) {
            if (content.is_string()) content = json::array({json{{"type", "text"}, {"text", content}}});
            if (!content.is_array()) content = json::array();
            if (!markers.empty()) content.insert(content.begin(), json{{"type", "text"}, {"text", markers}});
            continue;
        }
        if (join && content.is_array()) content = joined_text_parts(content);
        if (markers.empty()) continue;
        if (content.is_array())
            content.insert(content.begin(), json{{"type", "text"}, {"text", markers}});
        else
            content = markers + (content.is_string() ? content.get<std::string>() : std::string());
    }
    return out;
}

// Whether the template drops string contents but renders arrays of text parts (it iterates parts).
bool template_needs_parts(const ChatTemplate& tmpl) {
    const std::string probe = "cactus-probe-7f3a";
    auto renders = [&](const nlohmann::ordered_json& content) {
        nlohmann::ordered_json context;
        context["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
        context["add_generation_prompt"] = false;
        context["bos_token"] = "";
        context["eos_token"] = "";
        try {
            return tmpl.render_ordered(context).find(probe) != std::string::npos;
        } catch (const std::exception&) {
            return false;
        }
    };
    return !renders(probe) && renders(nlohmann::ordered_json::array({{{"type", "text"}, {"text", probe}}}));
}

// Whether the template can render a content array of text parts at all (many concatenate the
// content as a string and fail on an array: those get the parts joined).
bool template_renders_parts(const ChatTemplate& tmpl) {
    const std::string probe = "cactus-probe-7f3a";
    nlohmann::ordered_json context;
    context["messages"] = nlohmann::ordered_json::array(
        {{{"role", "user"}, {"content", nlohmann::ordered_json::array({{{"type", "text"}, {"text", probe}}})}}});
    context["add_generation_prompt"] = false;
    context["bos_token"] = "";
    context["eos_token"] = "";
    try {
        return tmpl.render_ordered(context).find(probe) != std::string::npos;
    } catch (const std::exception&) {
        return false;
    }
}

// Whether plain decoding samples from candidates computed on the device (Model::decode_top): on a
// GPU unless CACTUS_DEVICE_SAMPLING=0 (only a few hundred bytes come back per token instead of the
// logits); on the CPU, where the logits are in memory already, only with =1 (the tests compare
// both paths there).
bool device_sampling_wanted(const std::string& device) {
    const char* v = std::getenv("CACTUS_DEVICE_SAMPLING");
    if (v == nullptr || *v == '\0') return (device.empty() ? device_from_env("cpu") : device).rfind("cuda", 0) == 0;
    if (std::strcmp(v, "1") == 0) return true;
    if (std::strcmp(v, "0") == 0) return false;
    fail("CACTUS_DEVICE_SAMPLING: unknown value '%s' (0 or 1)", v);
}

}  // namespace

Engine::~Engine() = default;

bool Engine::samples_on_device() const {
    return model_->device_sampling() && device_sampling_wanted(model_options_.device);
}

std::unique_ptr<Engine> Engine::load(const std::string& model_path, const EngineOptions& options) {
    std::unique_ptr<Engine> engine(new Engine());
    engine->file_ = GgufFile::open(model_path);
    for (const std::string& table : Model::mapped_tables(*engine->file_)) engine->file_->keep_mapped(table);
    if (options.lock_weights) engine->file_->lock_in_memory();
    engine->model_options_.n_ctx = options.n_ctx;
    engine->model_options_.n_threads = options.n_threads;
    engine->model_options_.n_seq = options.n_seq;
    engine->model_options_.device = options.device.empty() ? device_from_env("cpu") : options.device;
    engine->model_options_.gpu_timeout_ms = options.gpu_timeout_ms;
    engine->model_options_.kv = options.kv;
    engine->model_ = Model::load(*engine->file_, engine->model_options_);
    engine->tokenizer_ = Tokenizer::from_gguf(*engine->file_);
    std::string source = options.chat_template;
    if (source.empty()) source = engine->file_->get_string("tokenizer.chat_template", "");
    if (source.empty()) source = builtin_chat_template(engine->model_->info().architecture);
    engine->template_ = std::make_unique<ChatTemplate>(source);
    engine->template_source_ = source;
    engine->format_ = tool_format_for(source);
    engine->content_parts_ = template_needs_parts(*engine->template_);
    engine->join_parts_ = !template_renders_parts(*engine->template_);
    engine->shown_special_ = marker_tokens(*engine->tokenizer_, *engine->format_);
    if (!options.mmproj_path.empty()) engine->load_mmproj(options.mmproj_path, options.n_threads);
    engine->set_speculative(options.spec);
    return engine;
}

std::string Engine::generated_piece(StreamingDetokenizer& detok, int32_t token) const {
    const bool marker =
        static_cast<size_t>(token) < shown_special_.size() && shown_special_[static_cast<size_t>(token)];
    return marker ? detok.push_bytes(tokenizer_->token_to_piece(token, true)) : detok.push(token);
}

std::string Engine::render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                bool add_generation_prompt, bool enable_thinking) const {
    ChatRender how;
    how.add_generation_prompt = add_generation_prompt;
    how.enable_thinking = enable_thinking;
    return render_chat(messages, tools, how);
}

namespace {

// Appended to the continued message's text: the rendered prompt is cut where it appears, which
// drops the template's end of turn whatever the template does around the text (even for "").
const char* const kContinueMarker = "<<cactus-continue-here>>";

nlohmann::ordered_json with_continue_marker(nlohmann::ordered_json messages) {
    if (messages.empty() || messages.back().value("role", "") != "assistant")
        fail("render_chat: continuing the final message needs an assistant message last");
    nlohmann::ordered_json& content = messages.back()["content"];
    if (content.is_null()) content = "";
    if (content.is_string()) {
        content = content.get<std::string>() + kContinueMarker;
    } else if (content.is_array()) {
        content.push_back({{"type", "text"}, {"text", kContinueMarker}});
    } else {
        fail("render_chat: the final assistant message's content must be text to continue it");
    }
    return messages;
}

}  // namespace

std::string Engine::render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                const ChatRender& how) const {
    const bool add_generation_prompt = how.add_generation_prompt && !how.continue_final_message;
    const nlohmann::ordered_json shown = how.continue_final_message ? with_continue_marker(messages) : messages;
    nlohmann::ordered_json context;
    context["messages"] = format_->prepare_messages(with_image_markers(shown, content_parts_, join_parts_));
    if (!tools.is_null() && !tools.empty()) context["tools"] = tools;
    context["add_generation_prompt"] = add_generation_prompt;
    context["bos_token"] = special_text(*tokenizer_, tokenizer_->bos_id());
    context["eos_token"] = special_text(*tokenizer_, tokenizer_->eos_id());
    context["enable_thinking"] = how.enable_thinking;
    for (const auto& [key, value] : how.template_kwargs.items())
        if (key != "messages" && key != "tools" && key != "add_generation_prompt") context[key] = value;
    std::string prompt = template_->render_ordered(context);
    if (how.continue_final_message) {
        const size_t at = prompt.rfind(kContinueMarker);
        if (at == std::string::npos)
            fail(
                "render_chat: the chat template does not show the final assistant message's text, so it cannot be "
                "continued");
        prompt.resize(at);
        return prompt;
    }
    format_->finish_prompt(prompt, add_generation_prompt);
    return prompt;
}

GrammarVocab& Engine::grammar_vocab() {
    if (grammar_vocab_) return *grammar_vocab_;
    const Tokenizer& tok = *tokenizer_;
    std::vector<std::string> bytes(tok.vocab_size());
    for (size_t id = 0; id < bytes.size(); ++id) {
        const int32_t i = static_cast<int32_t>(id);
        if (tok.is_end_of_generation(i)) continue;               // stop tokens: allowed once the grammar ends
        if (tok.is_control(i) && !shown_special_[id]) continue;  // never inside constrained text
        bytes[id] = tok.token_to_piece(i, /*render_special=*/true);
    }
    grammar_vocab_ = std::make_unique<GrammarVocab>(bytes, tok.end_of_generation_ids());
    return *grammar_vocab_;
}

std::vector<int32_t> Engine::tokenize_prompt(const std::string& text) const {
    std::vector<int32_t> ids = tokenizer_->encode(text, /*add_special=*/false, /*parse_special=*/true);
    int32_t bos = tokenizer_->bos_id();
    if (tokenizer_->add_bos() && bos >= 0 && (ids.empty() || ids[0] != bos)) {
        ids.insert(ids.begin(), bos);
    }
    return ids;
}

bool Engine::configure_context(const EngineContextOptions& options) {
    ModelOptions wanted = model_options_;
    if (options.n_ctx != 0) wanted.n_ctx = options.n_ctx;
    // The model's step holds a whole bidirectional image even when the prefill chunk is smaller.
    if (options.prefill_chunk != 0) wanted.n_batch = std::max(options.prefill_chunk, media_span_rows());
    const size_t chunk = options.prefill_chunk != 0 ? options.prefill_chunk : prefill_chunk_;
    wanted.kv = model_options_.kv.merged(options.kv);
    bool same = wanted.n_ctx == model_options_.n_ctx && wanted.n_batch == model_options_.n_batch &&
                wanted.kv == model_options_.kv;
    if (same) {
        prefill_chunk_ = chunk;
        return false;
    }
    std::unique_ptr<Model> rebuilt = Model::load(*file_, wanted);  // may throw; keep the old one then
    model_ = std::move(rebuilt);
    model_options_ = wanted;
    prefill_chunk_ = chunk;
    cached_ids_.clear();
    cached_keys_.clear();
    return true;
}

void Engine::check_prompt(const Prompt& p) const {
    const std::vector<int32_t>& prompt = p.ids;
    if (prompt.empty()) fail("complete: the prompt is empty");
    const size_t n_ctx = model_->info().n_ctx;
    if (!model_->info().kv.compress.enabled && prompt.size() >= n_ctx) {
        fail(
            "complete: the prompt has %zu tokens but the context holds %zu and kv_compress is off; "
            "shorten it, raise n_ctx or turn kv_compress on",
            prompt.size(), n_ctx);
    }
    if (p.rows && (p.rows->tokens != prompt || p.keys.size() != prompt.size()))
        fail("complete: the image rows do not match the prompt");  // an internal error
    for (int32_t id : prompt) {
        if (id < 0 && p.rows) continue;  // an image row
        if (id < 0 || static_cast<size_t>(id) >= tokenizer_->vocab_size())
            fail("complete: token id %d is outside the vocabulary", id);
    }
}

void Engine::take_call_epoch() {
    call_epoch_ = have_pending_epoch_ ? pending_epoch_ : stop_epoch_.load();
    have_pending_epoch_ = false;
}

size_t Engine::prefill_chunks(const Prompt& prompt, size_t from, std::vector<float>* logits) {
    const size_t chunk = std::max<size_t>(1, prefill_chunk_ ? prefill_chunk_ : model_options_.n_batch);
    const size_t n = prompt.ids.size() - from;
    size_t done = 0;
    while (done < n && !stopped()) {
        const size_t take = prompt.rows ? media_step(*prompt.rows, from + done, from + n, chunk, model_->n_batch())
                                        : std::min(chunk, n - done);
        if (prompt.rows)
            forward_rows(*prompt.rows, prompt.keys.data(), from + done, take, logits);
        else
            forward_cached(prompt.ids.data() + from + done, take, logits);
        done += take;
    }
    return done;
}

CompletionMetrics Engine::prefill(const std::vector<int32_t>& prompt) {
    Prompt p;
    p.ids = prompt;
    return prefill_prompt(p);
}

CompletionMetrics Engine::prefill_prompt(const Prompt& prompt) {
    Clock::time_point start = Clock::now();
    take_call_epoch();
    check_prompt(prompt);
    CompletionMetrics m;
    m.prompt_tokens = prompt.ids.size();
    size_t reused = reuse_prefix(prompt);
    std::vector<float> logits;
    m.prefill_tokens = prefill_chunks(prompt, reused, &logits);
    m.cancelled = m.prefill_tokens < prompt.ids.size() - reused;
    Clock::time_point end = Clock::now();
    finish_metrics(m, start, end, true, end);
    return m;
}

size_t Engine::keep_prefix(const std::vector<int32_t>& prompt) {
    Prompt p;
    p.ids = prompt;
    check_prompt(p);
    return reuse_prefix(p);
}

size_t Engine::context_room() const { return model_->context_room(); }

void Engine::reset() {
    model_->reset();
    cached_ids_.clear();
    cached_keys_.clear();
}

size_t Engine::reuse_prefix(const Prompt& p) {
    const std::vector<int32_t>& prompt = p.ids;
    size_t common = 0;
    size_t limit = std::min(cached_ids_.size(), prompt.size());
    // A token matches when its id and its key match: image rows are identified by their image's
    // bytes and their row, text tokens have key 0.
    while (common < limit && cached_ids_[common] == prompt[common] &&
           cached_keys_[common] == (p.keys.empty() ? 0 : p.keys[common]))
        ++common;
    // The last prompt token is always recomputed: its logits start generation.
    if (common == prompt.size() && common > 0) --common;
    // A bidirectional image span is recomputed whole (its rows see each other).
    if (p.rows && common < prompt.size()) common = p.rows->span_of(common).first;
    // cached_ids_ lists every token the session appended, including those whose rows compaction
    // dropped (positions are logical): a prompt extending them reuses the compacted cache as is.
    // Going back before the last compaction (or past overwritten ring rows) cannot be restored
    // exactly; the cache then says how much it kept (0) and the rest is recomputed.
    const size_t kept = model_->truncate(common);
    cached_ids_.resize(kept);
    cached_keys_.resize(kept);
    return kept;
}

void Engine::forward_cached(const int32_t* ids, size_t n, std::vector<float>* logits) {
    model_->forward(ids, n, logits);
    cached_ids_.insert(cached_ids_.end(), ids, ids + n);
    cached_keys_.insert(cached_keys_.end(), n, 0);
}

CompletionResult Engine::complete(const std::string& prompt_text, const GenerationOptions& options,
                                  const TokenCallback& on_token) {
    return complete_tokens(tokenize_prompt(prompt_text), options, on_token);
}

CompletionResult Engine::complete_tokens(const std::vector<int32_t>& prompt, const GenerationOptions& options,
                                         const TokenCallback& on_token) {
    Prompt p;
    p.ids = prompt;
    return complete_prompt(p, options, on_token);
}

CompletionResult Engine::complete_prompt(const Prompt& prompt, const GenerationOptions& options,
                                         const TokenCallback& on_token) {
    Clock::time_point start = Clock::now();
    take_call_epoch();
    check_prompt(prompt);
    CompletionResult result;
    result.metrics.prompt_tokens = prompt.ids.size();
    size_t reused = reuse_prefix(prompt);

    Sampler sampler(options.sampling);
    for (int32_t id : prompt.ids)
        if (id >= 0) sampler.accept(id);  // image rows are not tokens
    std::unique_ptr<GrammarConstraint> constraint;
    if (options.constraint) {
        constraint = std::make_unique<GrammarConstraint>(options.constraint);
        sampler.set_constraint(constraint.get());
    }
    std::vector<float> logits;
    const size_t suffix = prompt.ids.size() - reused;
    result.metrics.prefill_tokens = prefill_chunks(prompt, reused, &logits);
    if (result.metrics.prefill_tokens < suffix) {  // stopped during prefill: no token to sample
        result.metrics.cancelled = true;
        result.finish_reason = "cancelled";
        finish_metrics(result.metrics, start, start, false, Clock::now());
        return result;
    }

    StreamingDetokenizer detok(*tokenizer_);
    TextStream stream(options.stop_sequences, options.include_stop_sequences);
    Clock::time_point first_token_time;
    bool have_first = false;
    double probability_sum = 0.0;
    result.finish_reason = "length";
    // A grammar advances token by token as the reply is sampled: its replies decode plainly.
    SpecDecoder* spec = constraint ? nullptr : spec_decoder_.get();
    std::unique_ptr<SpecTarget> target = session_target();
    TokenSource source(*target, spec, sampler, spec != nullptr ? prompt.ids : std::vector<int32_t>(),
                       std::move(logits));
    // Without a grammar the bans (ignore_eos) hold for the whole reply: applied on the device.
    if (constraint == nullptr && samples_on_device())
        source.sample_on_device(std::min(sampler.top_candidates_wanted(), model_->info().n_vocab),
                                end_of_turn_allowed(options, nullptr) ? nullptr : &tokenizer_->end_of_generation_ids());

    for (size_t step = 0; step < options.max_tokens; ++step) {
        if (stopped()) {
            result.finish_reason = "cancelled";
            break;
        }
        const bool end_allowed = end_of_turn_allowed(options, constraint.get());
        sampler.set_banned(end_allowed ? nullptr : &tokenizer_->end_of_generation_ids());
        int32_t token = source.next();
        if (!have_first) {
            first_token_time = Clock::now();
            have_first = true;
        }
        if (end_allowed && tokenizer_->is_end_of_generation(token)) {
            result.finish_reason = "stop";
            break;
        }
        probability_sum += sampler.last_probability();
        result.token_probabilities.push_back(sampler.last_probability());
        result.tokens.push_back(token);
        sampler.accept(token);
        std::string shown = stream.push(generated_piece(detok, token));
        if (!shown.empty() && on_token) on_token(shown, token);
        if (stream.stopped()) {
            result.finish_reason = "stop";
            break;
        }
        bool last_step = step + 1 == options.max_tokens;
        if (last_step) break;
        if (model_->context_room() <= 1) {
            result.finish_reason = "length";
            break;
        }
        source.advance(token);
    }
    source.finish(prompt.ids.size(), result.tokens.size());
    result.metrics.draft_tokens = source.counters().drafted;
    result.metrics.draft_accepted = source.counters().accepted;
    result.metrics.decode_steps = source.counters().steps;
    if (!stream.stopped()) {
        std::string rest = stream.push(detok.flush());
        rest += stream.finish();
        if (!rest.empty() && on_token) on_token(rest, result.tokens.empty() ? -1 : result.tokens.back());
    }
    result.text = stream.text();
    result.metrics.decode_tokens = result.tokens.size();
    result.metrics.constraint_ms = sampler.constraint_ms();
    result.mean_token_probability =
        result.tokens.empty() ? 0.0f : static_cast<float>(probability_sum / result.tokens.size());
    finish_metrics(result.metrics, start, first_token_time, have_first, Clock::now());
    return result;
}

}  // namespace cactus
