/* cactus: on-device inference engine. The public C API, compatible with the Cactus FFI.
 *
 * Handles are opaque. Results are JSON written into a caller-allocated buffer; functions return
 * the number of bytes written (excluding the terminating NUL), or a negative code:
 *   CACTUS_ERROR (-1)            the call failed; cactus_get_last_error() says why
 *   CACTUS_BUFFER_TOO_SMALL (-2) the result did not fit; nothing was written past buffer_size
 * No C++ exception ever crosses this interface. See docs/API.md for the JSON formats and every
 * option, docs/RELIABILITY.md for every limit.
 *
 * Threads and handles:
 * - Calls on one handle are serialized (a call waits at most 600 s, then fails "busy"); different
 *   handles run concurrently.
 * - cactus_stop applies to every call on the handle that entered (was called) before the stop and
 *   has not returned, wherever it is: waiting for the handle, rendering, prefilling (checked between
 *   prefill chunks) or decoding (checked before every token). Never to a call entered later.
 * - A token callback must not call back into the same handle: such a call returns an error at once.
 *   cactus_stop and cactus_destroy are allowed from a callback.
 * - cactus_destroy stops the call in flight and waits for it (at most 600 s); queued and later
 *   calls on the handle fail cleanly with an error (a handle is an id checked on every call).
 */
#ifndef CACTUS_CACTUS_H
#define CACTUS_CACTUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CACTUS_API __declspec(dllexport)
#else
#define CACTUS_API __attribute__((visibility("default")))
#endif

#define CACTUS_ERROR (-1)
#define CACTUS_BUFFER_TOO_SMALL (-2)

typedef void* cactus_model_t;

/* Receives each new piece of generated text (whole UTF-8 characters, NUL-terminated) and the id of
 * the token that completed it. Stop tokens are never sent. */
typedef void (*cactus_token_callback)(const char* token, uint32_t token_id, void* user_data);

/* Receives log lines at or above the level set by cactus_log_set_level. */
typedef void (*cactus_log_callback)(int level, const char* message, void* user_data);

/* Loads a model: a .gguf file, a folder holding one, or a known short name ("smollm2-135m").
 * corpus_dir may be NULL. Returns NULL on failure (reason in cactus_get_last_error()). */
CACTUS_API cactus_model_t cactus_init(const char* model_path, const char* corpus_dir, bool cache_index);

/* Frees everything the handle holds: stops the call in flight and waits for it (at most 600 s;
 * from inside a callback, no wait: freed when that call returns); queued calls fail. NULL is
 * ignored; a stale handle is an error (cactus_get_last_error), never a crash. */
CACTUS_API void cactus_destroy(cactus_model_t model);

/* Forgets the cached conversation (KV cache and processed token ids). */
CACTUS_API void cactus_reset(cactus_model_t model);

/* Stops every call on this handle entered before this stop: a waiting call fails to start
 * generating, prefill ends within one chunk, decode within one token. Any thread, callbacks too. */
CACTUS_API void cactus_stop(cactus_model_t model);

/* "cpu", "cuda" or "auto"; applies to handles created afterwards. 0 on success, -1 if unavailable. */
CACTUS_API int cactus_set_backend(const char* name);

/* Chat completion. messages_json: [{role, content, ...}]; options_json and tools_json may be NULL.
 * callback may be NULL. A message may name "images": [paths] and "audio": [WAV paths, any rate and
 * channel count] (the model's mmproj needs a vision / an audio tower; at most 30 s per clip).
 * pcm_buffer: little-endian 16-bit mono 16 kHz audio attached to the last user message (after its
 * "audio" files), or NULL with pcm_buffer_size 0. Errors (-1): a model without an audio tower, NULL
 * with a size, a size of 0 or odd, more than 30 s; the handle stays usable.
 * Speculative decoding (the same reply in fewer model steps): options spec_type ("draft", "ngram",
 * "off"), draft_model (a path or known name; loaded once, kept by the handle), draft_max, draft_min;
 * the response then adds draft_tokens and draft_accepted. docs/API.md lists every option. */
CACTUS_API int cactus_complete(cactus_model_t model, const char* messages_json, char* response_buffer,
                               size_t buffer_size, const char* options_json, const char* tools_json,
                               cactus_token_callback callback, void* user_data, const uint8_t* pcm_buffer,
                               size_t pcm_buffer_size);

/* Fills the cache with the rendered conversation only (images and audio as cactus_complete); the
 * response holds {success, error, prefill_tokens, prefill_tps, total_time_ms, ram_usage_mb}. */
CACTUS_API int cactus_prefill(cactus_model_t model, const char* messages_json, char* response_buffer,
                              size_t buffer_size, const char* options_json, const char* tools_json,
                              const uint8_t* pcm_buffer, size_t pcm_buffer_size);

/* Text to token ids. Returns 0, -1 on error, or -2 when token_buffer is too small (out_token_len is
 * still set). A NULL token_buffer asks only for the count. */
CACTUS_API int cactus_tokenize(cactus_model_t model, const char* text, uint32_t* token_buffer, size_t token_buffer_len,
                               size_t* out_token_len);

/* The prompt text the chat template renders for these messages (with the generation prompt). */
CACTUS_API int cactus_render_prompt(cactus_model_t model, const char* messages_json, const char* options_json,
                                    const char* tools_json, char* buffer, size_t buffer_size);

/* Text embedding with any text model: an encoder (BERT family, e.g. `cactus pull all-minilm-l6-v2`)
 * pools its output as the file says (mean for MiniLM); a decoder mean-pools its final hidden states
 * (and forgets its cached conversation). Writes the vector to buffer (buffer_bytes >= dim * 4) and
 * the dimension to *embedding_dim. normalize: unit L2 length. A text longer than the model takes is
 * cut to fit. Returns the count of floats, -1 on error (empty text, bad handle), or -2 when the
 * buffer is too small (*embedding_dim is still set). */
CACTUS_API int cactus_embed(cactus_model_t model, const char* text, float* buffer, size_t buffer_bytes,
                            size_t* embedding_dim, bool normalize);

/* The mean of the vision encoder's projected output for an image (a model loaded with its mmproj);
 * unit L2 length. Same returns as cactus_embed; -1 for a model without a vision encoder. */
CACTUS_API int cactus_image_embed(cactus_model_t model, const char* image_path, float* buffer, size_t buffer_bytes,
                                  size_t* embedding_dim);

/* The mean of the Whisper encoder's output over the audio's frames (a WAV file; a Whisper handle);
 * unit L2 length. Same returns as cactus_embed; -1 for a model without an audio encoder. */
CACTUS_API int cactus_audio_embed(cactus_model_t model, const char* audio_path, float* buffer, size_t buffer_bytes,
                                  size_t* embedding_dim);

/* Retrieval over the corpus given to cactus_init: the top_k (0: 5) chunks for the query, as
 * {"chunks":[{"score", "source", "content"}]}, best first. Returns the bytes written; 0 with
 * {"chunks":[],"error":"..."} when the handle has no corpus or the query is empty; -1 on a bad
 * argument or a buffer too small. */
CACTUS_API int cactus_rag_query(cactus_model_t model, const char* query, char* response_buffer, size_t buffer_size,
                                size_t top_k);

/* Speech to text with a Whisper model handle (cactus_init on a converted whisper-* GGUF). Exactly one
 * of audio_path (a WAV file: any rate, channels, PCM 8-32 bit or float) and pcm_buffer (16-bit mono
 * 16 kHz) is given; prompt must be NULL. options_json (may be NULL): {language: "auto"|"en"|...,
 * translate, temperature (0: temperature 0 only, no fallback), no_speech_threshold, beam_size (1 =
 * greedy, the default; up to 16), patience (1), length_penalty (1)}. callback (may be NULL)
 * receives each segment's text as it is decoded. The response: {success, error, response, language,
 * segments: [{start, end, text}], total_time_ms, encoder_time_ms, audio_seconds, real_time_factor,
 * decode_tokens, decode_tps}. A text-only model gives -1 ("no audio encoder"). */
CACTUS_API int cactus_transcribe(cactus_model_t model, const char* audio_path, const char* prompt,
                                 char* response_buffer, size_t buffer_size, const char* options_json,
                                 cactus_token_callback callback, void* user_data, const uint8_t* pcm_buffer,
                                 size_t pcm_buffer_size);

/* Live transcription: start returns a stream (NULL on error); process appends 16-bit mono 16 kHz PCM
 * of any length and answers {success, error, confirmed, pending, ...}: `confirmed` only grows (text
 * once confirmed never changes), `pending` is the current guess for the rest. stop confirms the rest,
 * answers {confirmed, response, segments} and frees the stream (response_buffer may be NULL). One
 * stream per handle at a time is served; calls on the same handle are serialized. */
CACTUS_API void* cactus_stream_transcribe_start(cactus_model_t model, const char* options_json);
CACTUS_API int cactus_stream_transcribe_process(void* stream, const uint8_t* pcm_buffer, size_t pcm_buffer_size,
                                                char* response_buffer, size_t buffer_size);
CACTUS_API int cactus_stream_transcribe_stop(void* stream, char* response_buffer, size_t buffer_size);

/* The last error of the calling thread; never NULL ("" when none). */
CACTUS_API const char* cactus_get_last_error(void);

/* 0 debug, 1 info, 2 warning, 3 error, 4 none. Default 2. */
CACTUS_API void cactus_log_set_level(int level);
CACTUS_API void cactus_log_set_callback(cactus_log_callback callback, void* user_data);

#ifdef __cplusplus
}
#endif

#endif /* CACTUS_CACTUS_H */
