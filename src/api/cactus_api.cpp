// The C API (include/cactus/cactus.h) over the engine. Every entry point catches everything: no
// exception crosses into C. Errors are kept per thread for cactus_get_last_error().
#include "cactus/cactus.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "api/request.h"
#include "api/response.h"
#include "api/speech_api.h"
#include "chat/output_parser.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/model_store.h"
#include "models/audio/audio_input.h"
#include "tokenizer/tokenizer.h"

namespace {

using json = nlohmann::ordered_json;
using namespace cactus;

// How long a call waits for another call on the same handle to finish.
constexpr std::chrono::seconds kHandleWait{600};

struct Handle {
    std::unique_ptr<Engine> engine;              // text models
    std::unique_ptr<api::SpeechModel> speech;   // Whisper models (speech_api.h); engine is then null
    std::timed_mutex mutex;
};

thread_local std::string t_last_error;
std::atomic<int> g_backend{0};  // 0 cpu/auto

// Error messages may quote hostile input; keep them valid UTF-8 (invalid bytes become U+FFFD).
std::string valid_utf8(const std::string& text) {
    std::string quoted = json(text).dump(-1, ' ', false, json::error_handler_t::replace);
    return json::parse(quoted).get<std::string>();
}

void set_error(const std::string& message) {
    t_last_error = valid_utf8(message);
    CACTUS_LOG_DEBUG("%s", message.c_str());
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Runs body, turning every exception into -1 and a last-error message prefixed with `function`.
template <typename Body>
int guarded(const char* function, Body&& body) {
    try {
        t_last_error.clear();
        return body();
    } catch (const std::bad_alloc&) {
        set_error(std::string(function) + ": out of memory");
    } catch (const std::exception& e) {
        set_error(std::string(function) + ": " + e.what());
    } catch (...) {
        set_error(std::string(function) + ": unknown error");
    }
    return CACTUS_ERROR;
}

Handle* checked_handle(cactus_model_t model) {
    if (model == nullptr) fail("the model handle is NULL");
    Handle* h = static_cast<Handle*>(model);
    if (!h->engine) fail("this handle holds a speech model (Whisper); use cactus_transcribe");
    return h;
}

std::unique_lock<std::timed_mutex> lock_handle(Handle* h) {
    std::unique_lock<std::timed_mutex> lock(h->mutex, std::defer_lock);
    if (!lock.try_lock_for(kHandleWait)) fail("the handle is busy with another call (waited 600 s)");
    return lock;
}

void check_buffer(const char* buffer, size_t size) {
    if (buffer == nullptr) fail("response_buffer is NULL");
    if (size == 0) fail("buffer_size is 0");
}

// Writes an error response when it fits; returns -1 either way.
int fail_into(char* buffer, size_t size) {
    if (buffer != nullptr && size > 0) api::write_text(dump(api::error_response(t_last_error)), buffer, size);
    return CACTUS_ERROR;
}

int finish_write(const json& response, char* buffer, size_t size) {
    std::string text = dump(response);
    int written = api::write_text(text, buffer, size);
    if (written == CACTUS_BUFFER_TOO_SMALL)
        set_error("response needs " + std::to_string(text.size() + 1) + " bytes but buffer_size is " +
                  std::to_string(size));
    return written;
}

std::string render(Engine& engine, const json& messages, const json& tools, const api::ApiOptions& o) {
    json selected = api::select_tools(tools, messages, o.tool_rag_top_k);
    return engine.render_chat(messages, selected, /*add_generation_prompt=*/true, o.enable_thinking);
}

void check_no_audio(const uint8_t* pcm, size_t pcm_size) {
    if (pcm != nullptr || pcm_size != 0)
        fail("pcm_buffer: this model has no audio encoder; pass NULL and 0");
}

// A validated chat request: parsed inputs, the handle locked, the context configured and the
// prompt rendered. Shared by cactus_complete and cactus_prefill.
struct ChatRequest {
    json tools;
    api::ApiOptions options;
    std::unique_lock<std::timed_mutex> lock;
    std::string prompt;
};

ChatRequest prepare_chat(Handle* h, const char* messages_json, const char* options_json,
                         const char* tools_json) {
    ChatRequest r;
    json messages = api::parse_messages(messages_json);
    r.tools = api::parse_tools(tools_json);
    r.options = api::parse_options(options_json);
    r.lock = lock_handle(h);
    h->engine->configure_context(r.options.context);
    r.prompt = render(*h->engine, messages, r.tools, r.options);
    return r;
}

}  // namespace

extern "C" {

cactus_model_t cactus_init(const char* model_path, const char* corpus_dir, bool cache_index) {
    Handle* result = nullptr;
    guarded("cactus_init", [&]() -> int {
        if (model_path == nullptr) fail("model_path is NULL");
        if (corpus_dir != nullptr && corpus_dir[0] != '\0')
            fail("corpus_dir: retrieval over a corpus is not supported by this build; pass NULL");
        if (g_backend.load() != 0) fail("the selected backend is not available");
        auto handle = std::make_unique<Handle>();
        const std::string path = resolve_model_path(model_path);
        if (api::is_speech_model(path)) {
            handle->speech = std::make_unique<api::SpeechModel>(path);
        } else {
            handle->engine = Engine::load(path, EngineOptions{});
        }
        result = handle.release();
        return 0;
    });
    return result;
}

void cactus_destroy(cactus_model_t model) {
    if (model == nullptr) return;
    Handle* h = static_cast<Handle*>(model);
    {
        if (h->engine) h->engine->request_stop();
        std::unique_lock<std::timed_mutex> lock(h->mutex, std::defer_lock);
        if (!lock.try_lock_for(kHandleWait)) {
            set_error("cactus_destroy: the handle is still busy; not freed");
            return;
        }
    }
    delete h;
}

void cactus_reset(cactus_model_t model) {
    guarded("cactus_reset", [&]() -> int {
        Handle* h = checked_handle(model);
        auto lock = lock_handle(h);
        h->engine->reset();
        return 0;
    });
}

void cactus_stop(cactus_model_t model) {
    if (model != nullptr && static_cast<Handle*>(model)->engine) static_cast<Handle*>(model)->engine->request_stop();
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

int cactus_complete(cactus_model_t model, const char* messages_json, char* response_buffer,
                    size_t buffer_size, const char* options_json, const char* tools_json,
                    cactus_token_callback callback, void* user_data, const uint8_t* pcm_buffer,
                    size_t pcm_buffer_size) {
    int rc = guarded("cactus_complete", [&]() -> int {
        check_buffer(response_buffer, buffer_size);
        Handle* h = checked_handle(model);
        check_no_audio(pcm_buffer, pcm_buffer_size);
        ChatRequest request = prepare_chat(h, messages_json, options_json, tools_json);
        Engine& engine = *h->engine;
        TokenCallback on_token;
        if (callback != nullptr) {
            on_token = [&](const std::string& piece, int32_t id) {
                callback(piece.c_str(), static_cast<uint32_t>(id), user_data);
            };
        }
        CompletionResult result = engine.complete(request.prompt, request.options.generation, on_token);
        ParsedReply reply = parse_reply(result.text, !request.tools.empty());
        return finish_write(api::completion_response(result, reply, engine.model().kv_bytes()),
                            response_buffer, buffer_size);
    });
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

int cactus_prefill(cactus_model_t model, const char* messages_json, char* response_buffer,
                   size_t buffer_size, const char* options_json, const char* tools_json,
                   const uint8_t* pcm_buffer, size_t pcm_buffer_size) {
    int rc = guarded("cactus_prefill", [&]() -> int {
        check_buffer(response_buffer, buffer_size);
        Handle* h = checked_handle(model);
        check_no_audio(pcm_buffer, pcm_buffer_size);
        ChatRequest request = prepare_chat(h, messages_json, options_json, tools_json);
        CompletionMetrics m = h->engine->prefill(h->engine->tokenize_prompt(request.prompt));
        return finish_write(api::prefill_response(m), response_buffer, buffer_size);
    });
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

int cactus_tokenize(cactus_model_t model, const char* text, uint32_t* token_buffer,
                    size_t token_buffer_len, size_t* out_token_len) {
    return guarded("cactus_tokenize", [&]() -> int {
        Handle* h = checked_handle(model);
        if (text == nullptr) fail("text is NULL");
        if (out_token_len == nullptr) fail("out_token_len is NULL");
        auto lock = lock_handle(h);
        std::vector<int32_t> ids = h->engine->tokenizer().encode(text, /*add_special=*/false,
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
        Handle* h = checked_handle(model);
        json messages = api::parse_messages(messages_json);
        json tools = api::parse_tools(tools_json);
        api::ApiOptions options = api::parse_options(options_json);
        auto lock = lock_handle(h);
        std::string prompt = render(*h->engine, messages, tools, options);
        int written = api::write_text(prompt, buffer, buffer_size);
        if (written == CACTUS_BUFFER_TOO_SMALL)
            set_error("cactus_render_prompt: the prompt needs " + std::to_string(prompt.size() + 1) +
                      " bytes but buffer_size is " + std::to_string(buffer_size));
        return written;
    });
}

// ---- speech (Whisper handles; api/speech_api.h) --------------------------------------------------

int cactus_transcribe(cactus_model_t model, const char* audio_path, const char* prompt, char* response_buffer,
                      size_t buffer_size, const char* options_json, cactus_token_callback callback,
                      void* user_data, const uint8_t* pcm_buffer, size_t pcm_buffer_size) {
    int rc = guarded("cactus_transcribe", [&]() -> int {
        check_buffer(response_buffer, buffer_size);
        if (model == nullptr) fail("the model handle is NULL");
        Handle* h = static_cast<Handle*>(model);
        if (!h->speech) fail("this model has no audio encoder (not a Whisper model)");
        const bool has_path = audio_path != nullptr && audio_path[0] != '\0';
        const bool has_pcm = pcm_buffer != nullptr || pcm_buffer_size != 0;
        if (has_path == has_pcm) fail("give exactly one of audio_path and pcm_buffer");
        if (prompt != nullptr && prompt[0] != '\0') fail("prompt: an initial prompt is not supported yet; pass NULL");
        TranscribeOptions options = api::parse_transcribe_options(options_json);
        std::vector<float> audio = has_path ? read_wav_file(audio_path) : pcm16_to_float(pcm_buffer, pcm_buffer_size);
        auto lock = lock_handle(h);
        const Transcript t = transcribe(*h->speech->whisper, audio.data(), audio.size(), options,
                                        [&](const TranscriptSegment& s) {
                                            if (callback) callback(s.text.c_str(), 0, user_data);
                                        });
        return finish_write(api::transcript_response(t, true), response_buffer, buffer_size);
    });
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

struct cactus_stream_handle {
    Handle* owner;
    std::unique_ptr<api::SpeechStream> stream;
};

void* cactus_stream_transcribe_start(cactus_model_t model, const char* options_json) {
    cactus_stream_handle* result = nullptr;
    guarded("cactus_stream_transcribe_start", [&]() -> int {
        if (model == nullptr) fail("the model handle is NULL");
        Handle* h = static_cast<Handle*>(model);
        if (!h->speech) fail("this model has no audio encoder (not a Whisper model)");
        auto s = std::make_unique<cactus_stream_handle>();
        s->owner = h;
        s->stream = std::make_unique<api::SpeechStream>(*h->speech, api::parse_transcribe_options(options_json));
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
        auto lock = lock_handle(s->owner);
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
        auto lock = lock_handle(s->owner);
        if (response_buffer == nullptr || buffer_size == 0) return 0;  // just free the stream
        return finish_write(s->stream->stop(), response_buffer, buffer_size);
    });
    delete s;
    return rc == CACTUS_ERROR ? fail_into(response_buffer, buffer_size) : rc;
}

const char* cactus_get_last_error(void) { return t_last_error.c_str(); }

void cactus_log_set_level(int level) { cactus::log_set_level(level); }

void cactus_log_set_callback(cactus_log_callback callback, void* user_data) {
    cactus::log_set_callback(callback, user_data);
}

}  // extern "C"
