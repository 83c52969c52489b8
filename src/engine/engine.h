#pragma once
// The engine's C++ face: one loaded model with its tokenizer, chat template and a session that
// remembers the token ids already in the KV cache, so a prompt that extends them computes only
// the new suffix. Front ends (CLI, C API) sit on top of this.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model.h"
#include "sampling/grammar.h"
#include "sampling/sampler.h"
#include "engine/spec_options.h"

namespace cactus {

class GgufFile;
class Model;
class VisionEncoder;
class AudioEncoder;
struct MediaPrompt;
struct EncodedMedia;  // an image's or audio clip's layout (engine/encoded_media.h)
class Tokenizer;
class ChatTemplate;
class MarkerVocab;
class ToolFormat;
class StreamingDetokenizer;
class GrammarVocab;
struct CompiledConstraint;
class SpecDecoder;
class SpecTarget;

struct EngineOptions {
    size_t n_ctx = 0;           // 0 = min(trained context, 8192)
    int n_threads = 0;          // 0 = default
    bool lock_weights = false;  // mlock weights (or copy them to anonymous memory)
    size_t n_seq = 1;           // sequences the model holds (each its own cache); the session uses 0
    std::string device;         // "cpu", "cuda", "cuda:N"; empty = $CACTUS_DEVICE, else "cpu"
    int gpu_timeout_ms = 0;     // 0 = $CACTUS_GPU_TIMEOUT_MS, else 30000
    std::string mmproj_path;    // projector GGUF (llama.cpp's --mmproj): vision and/or audio tower; empty = text only
    KvRequest kv;               // KV storage type and compaction; unset fields take the defaults
    std::string chat_template;  // Jinja source replacing the GGUF's template (llama.cpp's --chat-template)
    SpecOptions spec;           // speculative decoding (off by default); see set_speculative()
};

// The text that stands for one image in a rendered prompt (llama.cpp's libmtmd uses the same).
constexpr const char* kImageMarker = "<__media__>";
// The text that stands for one audio clip in a rendered prompt.
constexpr const char* kAudioMarker = "<__audio__>";
// The prompt text split at kImageMarker: one piece more than it holds markers.
std::vector<std::string> split_at_markers(const std::string& text);

// The prompt text split at both markers, in order: pieces[i] precedes markers[i] (kinds), and
// pieces holds one more entry than markers.
struct MediaSplit {
    enum class Kind { image, audio };
    std::vector<std::string> pieces;
    std::vector<Kind> markers;
};
MediaSplit split_at_media_markers(const std::string& text);

// An image of a request, still encoded: its bytes identify it for prefix reuse; `name` (the
// path, or "<bytes>") appears in every decoding error.
struct ImageInput {
    std::string name;
    std::vector<uint8_t> bytes;
};

// An audio clip of a request: 16 kHz mono samples in [-1, 1]; its samples identify it for prefix
// reuse; `name` (the path, or "pcm_buffer") appears in every error.
struct AudioInput {
    std::string name;
    std::vector<float> samples;
};

// Per-request settings of the context and KV cache (C API options of ours). A request whose values
// differ from the handle's current ones rebuilds the cache (the conversation is forgotten).
struct EngineContextOptions {
    size_t n_ctx = 0;          // 0 = keep the handle's
    size_t prefill_chunk = 0;  // tokens per prefill step; 0 = keep the handle's (default 512)
    KvRequest kv;              // kv_cache_type, kv_compress*: unset fields keep the handle's
};

struct GenerationOptions {
    size_t max_tokens = 256;
    SamplingParams sampling;
    std::vector<std::string> stop_sequences;
    bool include_stop_sequences = false;
    // For tests and benchmarks: end-of-turn tokens are never drawn (as llama.cpp's ignore_eos),
    // so the reply runs to max_tokens, unless a grammar shapes the reply (end_of_turn_allowed).
    bool ignore_eos = false;
    // Constrained decoding (sampling/grammar.h): tokens outside the grammar are masked.
    std::shared_ptr<const CompiledConstraint> constraint;
};

// Whether an end-of-turn token may be drawn now (and then ends the reply). With ignore_eos only
// where a grammar shapes the reply (a plain one, or a lazy tool-call grammar after its trigger):
// the grammar then allows the end only once complete, so a reply with a forced call still stops
// right after the call, and one that opened a call ends only after the call is whole. A lazy
// grammar that was never triggered never ends a reply.
inline bool end_of_turn_allowed(const GenerationOptions& options, const GrammarConstraint* constraint) {
    return !options.ignore_eos || (constraint != nullptr && constraint->engaged());
}

struct CompletionMetrics {
    size_t prompt_tokens = 0;   // tokens of the whole prompt
    size_t prefill_tokens = 0;  // tokens actually computed (prompt minus the reused prefix)
    size_t decode_tokens = 0;   // tokens generated
    double time_to_first_token_ms = 0.0;
    double total_time_ms = 0.0;
    double prefill_tps = 0.0;            // prefill_tokens / prefill time; 0 when undefined
    double decode_tps = 0.0;             // (decode_tokens - 1) / (total - TTFT); 0 when undefined
    bool cancelled = false;              // a stop ended prefill early; prefill_tokens counts those computed
    double constraint_ms = 0.0;          // time the grammar spent masking logits and advancing
    double constraint_compile_ms = 0.0;  // time compiling the request's grammar (0 when cached)
    // Speculative decoding: tokens the drafters proposed, those the model accepted, and the model's
    // decode steps (plain and verifying ones): decode_tokens / decode_steps tokens per step.
    size_t draft_tokens = 0;
    size_t draft_accepted = 0;
    size_t decode_steps = 0;
};

struct CompletionResult {
    std::string text;
    std::vector<int32_t> tokens;  // generated ids (stop tokens excluded)
    std::string finish_reason;    // "stop" (end of turn or stop sequence), "length", "cancelled"
    float mean_token_probability = 0.0f;
    std::vector<float> token_probabilities;  // the sampler's probability of each generated token
    CompletionMetrics metrics;
};

// Receives each new piece of text (whole UTF-8 characters) and the token that completed it.
using TokenCallback = std::function<void(const std::string& piece, int32_t token_id)>;

// The "images" paths of the messages, in order (messages as the C API takes them).
std::vector<std::string> message_images(const nlohmann::ordered_json& messages);
// The "audio" paths of the messages, in order.
std::vector<std::string> message_audio(const nlohmann::ordered_json& messages);

class Engine {
public:
    static std::unique_ptr<Engine> load(const std::string& model_path, const EngineOptions& options);
    ~Engine();

    const Model& model() const { return *model_; }
    // For schedulers that drive several sequences themselves (tools/server): decode() batches of
    // sequences 1..n_seq-1 (and 0 when complete() is not used), bypassing the session.
    Model& model_for_batches() { return *model_; }
    // Whether replies sample from candidates computed where the logits are (Model::decode_top):
    // on a GPU unless CACTUS_DEVICE_SAMPLING=0, on the CPU only with =1 (read at each call).
    bool samples_on_device() const;
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    const GgufFile& file() const { return *file_; }

    // Renders the conversation with the model's chat template (or a built-in one for its family).
    // Each path of a message's "images" becomes a kImageMarker before the message's text, then
    // each of its "audio" a kAudioMarker. The
    // family's ToolFormat prepares the messages (prepare_messages) and finishes the prompt
    // where its template leaves it unable to generate (finish_prompt).
    std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                            bool add_generation_prompt, bool enable_thinking = false) const;
    // The Jinja source render_chat() uses (EngineOptions::chat_template, the GGUF's, or a built-in).
    const std::string& chat_template_source() const { return template_source_; }
    // The same with llama-server's request extensions: extra template variables
    // (chat_template_kwargs; enable_thinking among them overrides the flag), and continuing the
    // last message, an assistant's, instead of opening a new turn (assistant prefill): the prompt
    // ends where that message's text ends, without the template's end of turn.
    struct ChatRender {
        bool add_generation_prompt = true;
        bool enable_thinking = false;
        bool continue_final_message = false;
        nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
    };
    std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                            const ChatRender& how) const;
    // The family's tool-call / thinking format, chosen from the chat template.
    const ToolFormat& tool_format() const { return *format_; }
    // The text a generated token adds to a reply: the detokenizer's (whole UTF-8 characters), or
    // the text of one of the format's marker tokens (control tokens such as <|tool_call>, shown so
    // the output parser and the grammar see them). For loops that generate themselves (the server).
    std::string generated_piece(StreamingDetokenizer& detok, int32_t token) const;
    // The grammar engine's view of the vocabulary (built on first use, then cached with the
    // grammars it compiled).
    GrammarVocab& grammar_vocab();

    // Prompt text → ids: special tokens parsed, BOS added when the model wants one and the text
    // does not already start with it.
    std::vector<int32_t> tokenize_prompt(const std::string& text) const;

    CompletionResult complete(const std::string& prompt_text, const GenerationOptions& options,
                              const TokenCallback& on_token);
    CompletionResult complete_tokens(const std::vector<int32_t>& prompt, const GenerationOptions& options,
                                     const TokenCallback& on_token);

    // Images (src/engine/engine_media.cpp). The prompt text holds one kImageMarker per image, in
    // order; each marker becomes the image's layout of marker tokens and embeddings (the vision
    // projector's family). An image already in the cache at the same place (same bytes) is
    // reused like text, and one encoded in the previous call is not encoded again.
    bool has_vision() const { return vision_ != nullptr; }
    const VisionEncoder* vision() const { return vision_.get(); }
    // The backend of the media encoders (vision and audio towers, here and in the server): the text
    // model's device and GPU deadline with n_threads CPU threads, so --device cuda moves them too.
    BackendOptions encoder_options(int n_threads) const;
    CompletionResult complete_with_images(const std::string& prompt_text, const std::vector<ImageInput>& images,
                                          const GenerationOptions& options, const TokenCallback& on_token);
    CompletionMetrics prefill_with_images(const std::string& prompt_text, const std::vector<ImageInput>& images);
    // The mean of the vision projector's output rows for one image (the rows the prompt would
    // hold), unit L2 length: [n_embd].
    std::vector<float> image_embedding(const ImageInput& image);
    // Reads image files (the decoder's size limit) for the calls above; errors name the file, or
    // say that the model has no vision projector.
    std::vector<ImageInput> read_images(const std::vector<std::string>& paths) const;

    // Audio (src/engine/engine_audio.cpp): the audio tower of the mmproj (Gemma 4). The prompt
    // text holds one kAudioMarker per clip and one kImageMarker per image, in order; a clip is
    // identified by its samples for prefix reuse, like an image by its bytes.
    bool has_audio() const { return audio_ != nullptr; }
    AudioEncoder* audio() const { return audio_.get(); }
    CompletionResult complete_with_media(const std::string& prompt_text, const std::vector<ImageInput>& images,
                                         const std::vector<AudioInput>& audio, const GenerationOptions& options,
                                         const TokenCallback& on_token);
    CompletionMetrics prefill_with_media(const std::string& prompt_text, const std::vector<ImageInput>& images,
                                         const std::vector<AudioInput>& audio);
    // Reads WAV files (any rate and channel count: mono 16 kHz after), at most the tower's 30 s
    // each; errors name the file, or say that the model has no audio tower.
    std::vector<AudioInput> read_audio(const std::vector<std::string>& paths) const;
    // Checks a clip for the tower (not empty, at most 30 s); throws naming it.
    void check_audio(const AudioInput& clip) const;

    // Applies context options (see EngineContextOptions); returns true when the cache was rebuilt.
    bool configure_context(const EngineContextOptions& options);
    // Fills the cache with the prompt without generating; returns metrics like complete().
    CompletionMetrics prefill(const std::vector<int32_t>& prompt);

    // Step-level access for a scheduler that runs the generation loop itself (tools/server):
    // keep_prefix() checks the prompt, keeps the longest cached prefix of it (the last prompt
    // token is always recomputed) and returns its length; append() then adds the remaining prompt
    // tokens, in chunks if wanted, and each generated token, returning next-token logits.
    size_t keep_prefix(const std::vector<int32_t>& prompt);
    void append(const int32_t* ids, size_t n, std::vector<float>* logits) { forward_cached(ids, n, logits); }
    size_t context_room() const;  // tokens that may still be appended (SIZE_MAX with compaction)

    void reset();  // forget the cached conversation

    // Speculative decoding for the following calls (src/engine/speculative.h): loads the draft
    // model when it changes (its vocabulary must be the model's: a clear error otherwise, and the
    // previous settings stay). Replies are unchanged (greedy: the same tokens; sampling: the same
    // distribution); a reply with a grammar decodes plainly.
    void set_speculative(const SpecOptions& spec);
    const SpecOptions& speculative() const { return spec_; }

    // Cancellation. request_stop() (any thread) bumps a counter; a call is cancelled once the
    // counter differs from the value it started with: the value given to begin_call() (the C API
    // reads it when a call enters, before it waits for the handle), else the value at the start
    // of complete()/prefill(). So a stop applies to every call entered before it and still
    // running or waiting, wherever it is (waiting, rendering, prefilling, decoding), and never to
    // a later call. Prefill checks between chunks of the prefill chunk size, decode every token.
    void request_stop() { stop_epoch_.fetch_add(1); }
    uint64_t stop_epoch() const { return stop_epoch_.load(); }
    void begin_call(uint64_t entry_epoch) {
        pending_epoch_ = entry_epoch;
        have_pending_epoch_ = true;
    }
    const std::vector<int32_t>& cached_tokens() const { return cached_ids_; }

private:
    // A prompt after tokenization: ids, and for prompts with images, a key per token (0 for text;
    // image rows: the image's hash mixed with the row) and the rows' embeddings (ids < 0).
    struct Prompt {
        std::vector<int32_t> ids;
        std::vector<uint64_t> keys;               // empty = all text
        std::shared_ptr<const MediaPrompt> rows;  // null = all text
    };

    Engine() = default;
    size_t reuse_prefix(const Prompt& prompt);
    void forward_cached(const int32_t* ids, size_t n, std::vector<float>* logits);
    void forward_rows(const MediaPrompt& rows, const uint64_t* keys, size_t from, size_t n, std::vector<float>* logits);
    CompletionResult complete_prompt(const Prompt& prompt, const GenerationOptions& options,
                                     const TokenCallback& on_token);
    CompletionMetrics prefill_prompt(const Prompt& prompt);
    void load_mmproj(const std::string& mmproj_path, int n_threads);
    void load_vision(const std::string& mmproj_path, int n_threads);
    void load_audio(const std::string& mmproj_path, int n_threads);
    Prompt media_prompt(const std::string& prompt_text, const std::vector<ImageInput>& images,
                        const std::vector<AudioInput>& audio = {});
    std::shared_ptr<const EncodedMedia> encode_image(const ImageInput& input, const MarkerVocab& vocab,
                                                     const std::vector<std::shared_ptr<const EncodedMedia>>& fresh);
    std::shared_ptr<const EncodedMedia> encode_audio(const AudioInput& input, const MarkerVocab& vocab,
                                                     const std::vector<std::shared_ptr<const EncodedMedia>>& fresh);

    void check_prompt(const Prompt& prompt) const;

    ModelOptions model_options_;
    size_t prefill_chunk_ = 0;       // rows per prefill step asked for; 0 = n_batch (the model's step may be
                                     // larger: a bidirectional image is one step, media_span_rows())
    size_t media_span_rows() const;  // rows of a bidirectional image (gemma3), else 0
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::unique_ptr<ChatTemplate> template_;
    std::string template_source_;
    std::unique_ptr<ToolFormat> format_;
    std::vector<bool> shown_special_;  // control tokens rendered as text (the format's markers)
    bool content_parts_ = false;       // the template renders only content-part arrays (SmolVLM)
    bool join_parts_ = false;          // the template cannot render content-part arrays (Qwen2.5): joined
    std::unique_ptr<GrammarVocab> grammar_vocab_;
    std::vector<int32_t> cached_ids_;    // ids whose keys/values are in the cache, in order (< 0: image rows)
    std::vector<uint64_t> cached_keys_;  // beside cached_ids_: 0 for text, the row's key for image rows
    std::unique_ptr<GgufFile> mmproj_file_;
    std::unique_ptr<VisionEncoder> vision_;
    std::unique_ptr<AudioEncoder> audio_;
    std::vector<std::shared_ptr<const EncodedMedia>> encoded_;  // the images and clips of the last call
    bool stopped() const { return stop_epoch_.load(std::memory_order_relaxed) != call_epoch_; }
    void take_call_epoch();
    // Runs the prompt suffix through the model in prefill chunks, checking for a stop before
    // each; returns the tokens computed (n unless stopped).
    size_t prefill_chunks(const Prompt& prompt, size_t from, std::vector<float>* logits);

    // Speculative decoding (engine_spec.cpp): the options, the drafters they make, and the state
    // that adapts which drafter runs and how far it drafts, kept across calls.
    SpecOptions spec_;
    std::unique_ptr<SpecDecoder> spec_decoder_;
    // Keeps the first n cached tokens (fewer when the model can only restore an earlier state, then
    // recomputes up to n), keeping cached_ids_ in step with the cache.
    void keep_cached(size_t n);
    class SessionTarget;
    std::unique_ptr<SpecTarget> session_target();

    std::atomic<uint64_t> stop_epoch_{0};
    uint64_t call_epoch_ = 0;     // the current call's entry value of stop_epoch_
    uint64_t pending_epoch_ = 0;  // set by begin_call() for the next call
    bool have_pending_epoch_ = false;
};

}  // namespace cactus
