// The C API (include/cactus/cactus.h) over the engine. Every entry point catches everything: no
// exception crosses into C. Errors are kept per thread for cactus_get_last_error().
#include "cactus/cactus.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "api/cloud.h"
#include "api/constraints.h"
#include "api/guard.h"
#include "api/handle.h"
#include "api/rag_api.h"
#include "api/request.h"
#include "api/response.h"
#include "api/speech_api.h"
#include "chat/json_parse.h"
#include "chat/output_parser.h"
#include "chat/stream_filter.h"
#include "chat/tool_format.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/model_store.h"
#include "gguf/gguf.h"
#include "media/audio_input.h"
#include "models/audio/gemma4_audio.h"
#include "tokenizer/tokenizer.h"

namespace {

using json = nlohmann::ordered_json;
using namespace cactus;
using api::check_buffer;
using api::dump;
using api::fail_into;
using api::finish_write;
using api::guarded;
using api::Handle;
using api::Lease;
using api::set_error;
using api::Use;

std::atomic<int> g_backend{0};  // 0 cpu/auto

std::string render(Engine& engine, const json& messages, const json& selected, const api::ApiOptions& o) {
    return engine.render_chat(messages, selected, /*add_generation_prompt=*/true, o.enable_thinking);
}

// The placeholder standing for the pcm_buffer clip in the last user message's "audio".
const char* const kPcmPlaceholder = "\x01pcm_buffer";

// The call's pcm_buffer as a clip (16-bit mono 16 kHz), or none for NULL and 0.
std::optional<AudioInput> pcm_clip(const Engine& engine, const uint8_t* pcm, size_t pcm_size) {
    if (pcm == nullptr && pcm_size == 0) return std::nullopt;
    if (!engine.has_audio()) fail("pcm_buffer: this model has no audio encoder; pass NULL and 0");
    if (pcm == nullptr) fail("pcm_buffer is NULL but pcm_buffer_size is %zu", pcm_size);
    if (pcm_size == 0) fail("pcm_buffer: pcm_buffer_size is 0 (pass NULL and 0 for no audio)");
    AudioLimits limits;  // refused before converting more than the tower takes
    limits.max_seconds = double(AudioEncoder::kMaxSamples) / double(AudioEncoder::kSampleRate);
    AudioInput clip{"pcm_buffer", {}};
    try {
        clip.samples = pcm16_to_float(pcm, pcm_size, limits);
    } catch (const Error& e) {
        fail("pcm_buffer: %s", e.what());
    }
    engine.check_audio(clip);
    return clip;
}

// Attaches the pcm_buffer clip to the last user message (after its own "audio" files).
void attach_pcm(json* messages) {
    for (auto m = messages->rbegin(); m != messages->rend(); ++m) {
        if (!m->is_object() || m->value("role", "") != "user") continue;
        if (!m->contains("audio")) (*m)["audio"] = json::array();
        (*m)["audio"].push_back(kPcmPlaceholder);
        return;
    }
    fail("pcm_buffer: the messages hold no user message to attach the audio to");
}

// Audio content parts carry no clip the engine takes (the template would show a bare audio token):
// on a model with an audio tower they are an error pointing to "audio" and pcm_buffer.
void check_no_audio_parts(const Engine& engine, const json& messages) {
    if (!engine.has_audio()) return;
    for (size_t i = 0; i < messages.size(); ++i) {
        const json& content = messages[i].contains("content") ? messages[i]["content"] : json();
        if (!content.is_array()) continue;
        for (const json& part : content)
            if (part.is_object() && (part.value("type", "") == "input_audio" || part.value("type", "") == "audio"))
                fail(
                    "messages[%zu]: audio content parts are not taken by the C API: name the WAV file in the "
                    "message's \"audio\" or pass the samples as pcm_buffer",
                    i);
    }
}

// The messages' audio clips in order: files read, the placeholder replaced by the pcm_buffer clip.
std::vector<AudioInput> message_clips(const Engine& engine, const json& messages, std::optional<AudioInput>* pcm) {
    std::vector<AudioInput> clips;
    for (const std::string& path : message_audio(messages)) {
        if (path == kPcmPlaceholder) {
            clips.push_back(std::move(**pcm));
            continue;
        }
        std::vector<AudioInput> read = engine.read_audio({path});
        clips.push_back(std::move(read.at(0)));
    }
    return clips;
}

// Speculative decoding as the request asks (api/request.h: keys left out keep the handle's). The
// draft model loads only when it changes; a failure leaves the handle's settings as they were.
void configure_speculative(Engine& engine, const api::SpecRequest& request) {
    if (!request.given()) return;
    const SpecOptions spec = api::speculative_options(engine.speculative(), request);
    try {
        engine.set_speculative(spec);
    } catch (const Error& e) {
        fail("options: speculative decoding (spec_type \"%s\"%s%s): %s", spec_type_name(spec.type),
             spec.draft_model.empty() ? "" : ", draft_model ", spec.draft_model.c_str(), e.what());
    }
}

// A validated chat request: parsed inputs, the context configured and the prompt rendered, under
// the caller's lease. Shared by cactus_complete and cactus_prefill.
struct ChatRequest {
    json messages;
    json all_tools;  // as given (the hand-off endpoint sees them all)
    json tools;      // the tools shown to the model (after tool_rag_top_k)
    api::ApiOptions options;
    std::string prompt;              // one kImageMarker per image, one kAudioMarker per clip
    std::vector<ImageInput> images;  // the messages' images, in order
    std::vector<AudioInput> audio;   // the messages' clips (the pcm_buffer's last), in order
};

ChatRequest prepare_chat(const Lease& lease, const char* messages_json, const char* options_json,
                         const char* tools_json, const uint8_t* pcm_buffer, size_t pcm_buffer_size) {
    Engine& engine = lease.engine();
    ChatRequest r;
    std::optional<AudioInput> pcm = pcm_clip(engine, pcm_buffer, pcm_buffer_size);
    r.messages = api::ground_messages(*lease.handle(), api::parse_messages(messages_json));
    check_no_audio_parts(engine, r.messages);
    json shown = r.messages;  // the hand-off sends r.messages: no placeholder for the PCM clip
    if (pcm) attach_pcm(&shown);
    r.options = api::parse_options(options_json);
    r.all_tools = api::parse_tools(tools_json);
    r.tools = api::select_tools(r.all_tools, r.messages, r.options.tool_rag_top_k);
    engine.configure_context(r.options.context);
    configure_speculative(engine, r.options.spec);
    r.prompt = render(engine, shown, r.tools, r.options);
    r.images = engine.read_images(message_images(shown));
    r.audio = message_clips(engine, shown, &pcm);
    return r;
}

// The local completion: constrained when the request asks, pieces streamed to the callback with
// markers and what lies between them (calls, thinking) hidden.
json complete_locally(Engine& engine, const ChatRequest& request, cactus_token_callback callback, void* user_data,
                      CompletionResult* result) {
    GenerationOptions generation = request.options.generation;
    const size_t compactions_before = engine.model().kv_compactions();  // the cache is configured already
    const ToolFormat& format = engine.tool_format();
    // A prompt may end inside a hidden region (Gemma 4 with thinking on opens the thought after
    // tool results): the reply then starts in it, for the stream, the grammar and the parser.
    const std::vector<HiddenRegion> regions = format.hidden_regions();
    const int opened = region_open_at_end(regions, request.prompt);
    const bool opened_thinking =
        opened >= 0 && regions[static_cast<size_t>(opened)].open == format.thinking_region().open;
    std::optional<ConstraintSpec> spec = api::constraint_for(format, request.tools, request.options, opened_thinking);
    auto compile_start = std::chrono::steady_clock::now();
    if (spec) generation.constraint = engine.grammar_vocab().compile(*spec);
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compile_start).count();
    StreamFilter filter(regions, opened);
    TokenCallback on_token;
    if (callback != nullptr) {
        on_token = [&](const std::string& piece, int32_t id) {
            std::string shown = filter.push(piece);
            if (!shown.empty()) callback(shown.c_str(), static_cast<uint32_t>(id), user_data);
        };
    }
    *result = request.images.empty() && request.audio.empty()
                  ? engine.complete(request.prompt, generation, on_token)
                  : engine.complete_with_media(request.prompt, request.images, request.audio, generation, on_token);
    result->metrics.constraint_compile_ms = spec ? compile_ms : 0.0;
    std::string rest = filter.finish();
    if (callback != nullptr && !rest.empty())
        callback(rest.c_str(), result->tokens.empty() ? 0u : static_cast<uint32_t>(result->tokens.back()), user_data);
    const std::string reply_text =
        opened >= 0 ? regions[static_cast<size_t>(opened)].open + result->text : result->text;
    ParsedReply reply = parse_reply(format, reply_text, !request.tools.empty());
    const size_t compactions = engine.model().kv_compactions();
    json response = api::completion_response(*result, reply, engine.model().kv_bytes(),
                                             compactions > compactions_before ? compactions - compactions_before : 0);
    if (engine.speculative().type != SpecType::off) api::add_speculative_metrics(result->metrics, &response);
    return response;
}

// The cloud hand-off after a local answer: when its first tokens were unsure (api/cloud.h).
void maybe_hand_off(const HandoffConfig& cloud, const ChatRequest& request, const CompletionResult& result,
                    json* response) {
    const double confidence = mean_of_first(result.token_probabilities, cloud.confidence_tokens);
    if (confidence >= cloud.confidence_threshold) return;
    const size_t n = std::min(cloud.confidence_tokens, result.token_probabilities.size());
    api::CloudOutcome outcome =
        api::hand_off(cloud, api::chat_request(request.messages, request.all_tools, request.options),
                      low_confidence_reason(confidence, cloud.confidence_threshold, n));
    api::apply_outcome(*response, outcome);
}

}  // namespace

extern "C" {

cactus_model_t cactus_init(const char* model_path, const char* corpus_dir, bool cache_index) {
    cactus_model_t result = nullptr;
    guarded("cactus_init", [&]() -> int {
        if (model_path == nullptr) fail("model_path is NULL");
        if (g_backend.load() != 0) fail("the selected backend is not available");
        auto handle = std::make_shared<Handle>();
        const std::string path = resolve_model_path(model_path);
        // The header is read once here for the architecture; the loader below opens the file again.
        const std::string arch = GgufFile::open(path)->get_string("general.architecture", "");
        if (api::is_speech_architecture(arch)) {
            BackendOptions options;  // where the text models run (Engine::load): $CACTUS_DEVICE, else the CPU
            options.device = device_from_env("cpu");
            handle->speech = std::make_unique<api::SpeechModel>(path, options);
        } else if (TextEmbedder::is_encoder_architecture(arch)) {
            handle->embedder = TextEmbedder::load_encoder(path);
        } else {
            EngineOptions options;
            options.mmproj_path = resolve_mmproj_path(model_path);
            handle->engine = Engine::load(path, options);
        }
        if (corpus_dir != nullptr && corpus_dir[0] != '\0') api::open_corpus(*handle, corpus_dir, cache_index);
        result = api::register_handle(std::move(handle));
        return 0;
    });
    return result;
}

void cactus_destroy(cactus_model_t model) {
    if (model == nullptr) return;
    guarded("cactus_destroy", [&]() -> int {
        std::shared_ptr<Handle> h = api::take_handle(model);  // later calls fail at once
        api::HandleModels freed;
        std::unique_lock<std::mutex> lock(h->mutex);
        h->closed = true;
        if (h->engine) h->engine->request_stop();                         // the call in flight ends within a step
        h->idle.notify_all();                                             // queued calls wake up and fail
        if (h->busy && h->owner == std::this_thread::get_id()) return 0;  // from a callback: freed by that call
        h->destroy_waiting = true;
        const bool idle = h->idle.wait_for(lock, api::kHandleWait, [&] { return !h->busy; });
        h->destroy_waiting = false;
        if (!idle) {
            fail("the call in flight did not end within %lld s; the model is freed when it does",
                 static_cast<long long>(api::kHandleWait.count()));
        }
        freed = api::take_models(*h);
        lock.unlock();
        return 0;  // `freed` goes here, outside the lock
    });
}

void cactus_reset(cactus_model_t model) {
    guarded("cactus_reset", [&]() -> int {
        Lease lease(model, Use::EMBED);  // an encoder has no conversation to forget
        if (lease.handle()->engine) lease.engine().reset();
        return 0;
    });
}

void cactus_stop(cactus_model_t model) {
    guarded("cactus_stop", [&]() -> int {
        std::shared_ptr<Handle> h = api::find_handle(model);
        std::lock_guard<std::mutex> lock(h->mutex);
        if (h->engine) h->engine->request_stop();
        return 0;
    });
}

int cactus_set_backend(const char* name) {
    return guarded("cactus_set_backend", [&]() -> int {
        if (name == nullptr) fail("name is NULL");
        std::string n = name;
        if (n == "cpu" || n == "auto") {
            g_backend.store(0);
            return 0;
        }
        if (n == "cuda") fail("the CUDA backend is not available in this build");
        fail("unknown backend '%s' (use cpu, cuda or auto)", name);
    });
}

int cactus_complete(cactus_model_t model, const char* messages_json, char* response_buffer, size_t buffer_size,
                    const char* options_json, const char* tools_json, cactus_token_callback callback, void* user_data,
                    const uint8_t* pcm_buffer, size_t pcm_buffer_size) {
    int rc = guarded("cactus_complete", [&]() -> int {
        check_buffer(response_buffer, buffer_size);
        Lease lease(model);
        Engine& engine = lease.engine();
        ChatRequest request = prepare_chat(lease, messages_json, options_json, tools_json, pcm_buffer, pcm_buffer_size);
        const std::optional<HandoffConfig> cloud = api::handoff_config(request.options);
        api::CloudOutcome forced;
        if (cloud && api::handoff_forced(request.options)) {  // the endpoint first, the local model if it fails
            forced = api::hand_off(*cloud, api::chat_request(request.messages, request.all_tools, request.options),
                                   "confidence_threshold >= 1 forces the hand-off");
            if (forced.answered) {
                json response =
                    api::completion_response(CompletionResult{}, ParsedReply{}, engine.model().kv_bytes(), 0);
                api::apply_outcome(response, forced);
                return finish_write(response, response_buffer, buffer_size);
            }
        }
        CompletionResult result;
        json response = complete_locally(engine, request, callback, user_data, &result);
        if (!forced.error.empty())
            api::apply_outcome(response, forced);
        else if (cloud)
            maybe_hand_off(*cloud, request, result, &response);
        return finish_write(response, response_buffer, buffer_size);
    });
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

int cactus_prefill(cactus_model_t model, const char* messages_json, char* response_buffer, size_t buffer_size,
                   const char* options_json, const char* tools_json, const uint8_t* pcm_buffer,
                   size_t pcm_buffer_size) {
    int rc = guarded("cactus_prefill", [&]() -> int {
        check_buffer(response_buffer, buffer_size);
        Lease lease(model);
        Engine& engine = lease.engine();
        ChatRequest request = prepare_chat(lease, messages_json, options_json, tools_json, pcm_buffer, pcm_buffer_size);
        CompletionMetrics m = request.images.empty() && request.audio.empty()
                                  ? engine.prefill(engine.tokenize_prompt(request.prompt))
                                  : engine.prefill_with_media(request.prompt, request.images, request.audio);
        if (m.cancelled) {
            fail("stopped by cactus_stop after %zu of %zu prompt tokens", m.prefill_tokens, m.prompt_tokens);
        }
        return finish_write(api::prefill_response(m), response_buffer, buffer_size);
    });
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

int cactus_tokenize(cactus_model_t model, const char* text, uint32_t* token_buffer, size_t token_buffer_len,
                    size_t* out_token_len) {
    return guarded("cactus_tokenize", [&]() -> int {
        if (text == nullptr) fail("text is NULL");
        if (out_token_len == nullptr) fail("out_token_len is NULL");
        Lease lease(model);
        std::vector<int32_t> ids = lease.engine().tokenizer().encode(text, /*add_special=*/false,
                                                                     /*parse_special=*/true);
        *out_token_len = ids.size();
        if (token_buffer == nullptr) return 0;
        if (ids.size() > token_buffer_len) {
            set_error("cactus_tokenize: " + std::to_string(ids.size()) + " tokens but the buffer holds " +
                      std::to_string(token_buffer_len));
            return CACTUS_BUFFER_TOO_SMALL;
        }
        for (size_t i = 0; i < ids.size(); ++i) token_buffer[i] = static_cast<uint32_t>(ids[i]);
        return 0;
    });
}

int cactus_render_prompt(cactus_model_t model, const char* messages_json, const char* options_json,
                         const char* tools_json, char* buffer, size_t buffer_size) {
    return guarded("cactus_render_prompt", [&]() -> int {
        check_buffer(buffer, buffer_size);
        api::ApiOptions options = api::parse_options(options_json);
        Lease lease(model);
        json messages = api::ground_messages(*lease.handle(), api::parse_messages(messages_json));
        json tools = api::select_tools(api::parse_tools(tools_json), messages, options.tool_rag_top_k);
        std::string prompt = render(lease.engine(), messages, tools, options);
        int written = api::write_text(prompt, buffer, buffer_size);
        if (written == CACTUS_BUFFER_TOO_SMALL)
            set_error("cactus_render_prompt: the prompt needs " + std::to_string(prompt.size() + 1) +
                      " bytes but buffer_size is " + std::to_string(buffer_size));
        return written;
    });
}

// ---- speech (Whisper handles; api/speech_api.h) --------------------------------------------------

int cactus_transcribe(cactus_model_t model, const char* audio_path, const char* prompt, char* response_buffer,
                      size_t buffer_size, const char* options_json, cactus_token_callback callback, void* user_data,
                      const uint8_t* pcm_buffer, size_t pcm_buffer_size) {
    int rc = guarded("cactus_transcribe", [&]() -> int {
        check_buffer(response_buffer, buffer_size);
        const bool has_path = audio_path != nullptr && audio_path[0] != '\0';
        const bool has_pcm = pcm_buffer != nullptr || pcm_buffer_size != 0;
        if (has_path == has_pcm) fail("give exactly one of audio_path and pcm_buffer");
        if (prompt != nullptr && prompt[0] != '\0') fail("prompt: an initial prompt is not supported yet; pass NULL");
        TranscribeOptions options = api::parse_transcribe_options(options_json);
        Lease lease(model, Use::SPEECH);
        std::vector<float> audio = has_path ? read_wav_file(audio_path) : pcm16_to_float(pcm_buffer, pcm_buffer_size);
        const Transcript t =
            transcribe(*lease.speech().whisper, audio.data(), audio.size(), options, [&](const TranscriptSegment& s) {
                if (callback) callback(s.text.c_str(), 0, user_data);
            });
        return finish_write(api::transcript_response(t, true), response_buffer, buffer_size);
    });
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

// A stream keeps its model's handle alive (shared) until it is stopped, even past cactus_destroy.
struct cactus_stream_handle {
    cactus_model_t model;
    std::shared_ptr<Handle> keep;
    std::unique_ptr<api::SpeechStream> stream;
};

void* cactus_stream_transcribe_start(cactus_model_t model, const char* options_json) {
    cactus_stream_handle* result = nullptr;
    guarded("cactus_stream_transcribe_start", [&]() -> int {
        const TranscribeOptions options = api::parse_transcribe_options(options_json);
        Lease lease(model, Use::SPEECH);
        auto s = std::make_unique<cactus_stream_handle>();
        s->model = model;
        s->keep = lease.handle();
        s->stream = std::make_unique<api::SpeechStream>(lease.speech(), options);
        result = s.release();
        return 0;
    });
    return result;
}

int cactus_stream_transcribe_process(void* stream, const uint8_t* pcm_buffer, size_t pcm_buffer_size,
                                     char* response_buffer, size_t buffer_size) {
    int rc = guarded("cactus_stream_transcribe_process", [&]() -> int {
        check_buffer(response_buffer, buffer_size);
        if (stream == nullptr) fail("the stream handle is NULL");
        auto* s = static_cast<cactus_stream_handle*>(stream);
        Lease lease(s->model, Use::SPEECH);
        return finish_write(s->stream->process(pcm_buffer, pcm_buffer_size), response_buffer, buffer_size);
    });
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

int cactus_stream_transcribe_stop(void* stream, char* response_buffer, size_t buffer_size) {
    if (stream == nullptr) {
        set_error("cactus_stream_transcribe_stop: the stream handle is NULL");
        return CACTUS_ERROR;
    }
    auto* s = static_cast<cactus_stream_handle*>(stream);
    int rc = guarded("cactus_stream_transcribe_stop", [&]() -> int {
        if (response_buffer == nullptr || buffer_size == 0) return 0;  // just free the stream
        Lease lease(s->model, Use::SPEECH);
        return finish_write(s->stream->stop(), response_buffer, buffer_size);
    });
    delete s;
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

const char* cactus_get_last_error(void) { return api::last_error().c_str(); }

void cactus_log_set_level(int level) { cactus::log_set_level(level); }

void cactus_log_set_callback(cactus_log_callback callback, void* user_data) {
    cactus::log_set_callback(callback, user_data);
}

}  // extern "C"
