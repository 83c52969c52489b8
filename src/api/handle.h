#pragma once
// The C API's model handles: a registry of ids (cactus_model_t is an id, never a pointer, so a
// destroyed or never valid handle is an error, never a use after free) and the Lease that gives a
// call exclusive use of a handle. Calls hold the handle through a Lease: `busy` (with the calling
// thread as owner) while the call runs, the mutex only for a moment, so cactus_stop and
// cactus_destroy never wait behind a call.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "api/speech_api.h"
#include "engine/embedding.h"
#include "engine/engine.h"

namespace cactus {
class CorpusIndex;
}

namespace cactus::api {

// How long a call waits for another call on the same handle to finish, and how long
// cactus_destroy waits for the call in flight.
constexpr std::chrono::seconds kHandleWait{600};

// One loaded model: a text engine, a Whisper model or an embedding-only encoder (BERT).
struct Handle {
    // Freed by destroy, or by the last call once destroyed (members free in reverse order: the
    // corpus and the embedder, which may use the engine, go first).
    std::unique_ptr<Engine> engine;
    std::unique_ptr<SpeechModel> speech;         // Whisper models (speech_api.h); engine is then null
    std::unique_ptr<TextEmbedder> embedder;      // encoder files (engine null), or made over the engine on first use
    std::unique_ptr<TextEmbedder> rag_embedder;  // the corpus's own embedding model (api/rag_api.h), if not the above
    std::unique_ptr<CorpusIndex> corpus;         // cactus_init's corpus_dir (engine/retrieval)
    std::mutex mutex;                            // guards everything below and the model pointers
    std::condition_variable idle;                // signalled when busy clears or the handle closes
    bool busy = false;
    std::thread::id owner;         // the thread of the call in flight
    bool closed = false;           // cactus_destroy was called
    bool destroy_waiting = false;  // cactus_destroy waits to free the models itself
    Handle();                      // out of line, as the destructor: CorpusIndex is complete only in handle.cpp
    ~Handle();
};

// A handle's models, taken out under its mutex to be freed outside it (a model may take a while
// to free, and stop/destroy never wait behind that).
struct HandleModels {
    std::unique_ptr<Engine> engine;
    std::unique_ptr<SpeechModel> speech;
    std::unique_ptr<TextEmbedder> embedder;
    std::unique_ptr<TextEmbedder> rag_embedder;
    std::unique_ptr<CorpusIndex> corpus;
    HandleModels();
    HandleModels(HandleModels&&) noexcept;
    HandleModels& operator=(HandleModels&&) noexcept;
    ~HandleModels();  // the corpus, then the embedders (they may use the engine), then the models
};
HandleModels take_models(Handle& h);  // call with h.mutex held

// Registers a loaded handle; returns its id.
void* register_handle(std::shared_ptr<Handle> handle);
// Looks an id up; throws cactus::Error for NULL, destroyed or unknown ids.
std::shared_ptr<Handle> find_handle(void* model);
// Removes an id from the registry (later calls fail at once) and returns its handle.
std::shared_ptr<Handle> take_handle(void* model);

// What a call needs from the handle.
enum class Use {
    TEXT,    // a text engine (chat, tokenize, render)
    SPEECH,  // a Whisper model
    EMBED,   // anything that embeds text: an encoder, or a text engine
};

// Exclusive use of a handle for one call. The stop counter is read at entry, before waiting, so a
// stop sent while this call waits (or renders, or prefills) ends it.
class Lease {
public:
    explicit Lease(void* model, Use use = Use::TEXT);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Engine& engine() const { return *h_->engine; }
    SpeechModel& speech() const { return *h_->speech; }
    // The handle's text embedder (an encoder's, or one over the engine, made on first use).
    TextEmbedder& embedder() const;
    const std::shared_ptr<Handle>& handle() const { return h_; }

private:
    std::shared_ptr<Handle> h_;
};

}  // namespace cactus::api
