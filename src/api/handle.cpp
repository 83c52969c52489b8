// The handle registry and leases of the C API (api/handle.h).
#include "api/handle.h"

#include <unordered_map>

#include "core/error.h"
#include "engine/retrieval/corpus_index.h"

namespace cactus::api {

namespace {

std::mutex g_registry_mutex;
std::unordered_map<uintptr_t, std::shared_ptr<Handle>> g_registry;
uintptr_t g_next_id = 0x1000;  // ids step by 16: never NULL, never a small integer

const char* missing_model(const Handle& h, Use use) {
    switch (use) {
        case Use::SPEECH:
            return h.speech ? nullptr : "this model has no audio encoder (not a Whisper model)";
        case Use::EMBED:
            return h.engine || h.embedder ? nullptr
                                          : "this handle holds a speech model (Whisper); use cactus_transcribe";
        case Use::TEXT:
            if (h.engine) return nullptr;
            if (h.embedder) return "this handle holds an embedding model (an encoder); it cannot generate text";
            return "this handle holds a speech model (Whisper); use cactus_transcribe";
    }
    return nullptr;
}

}  // namespace

Handle::Handle() = default;
Handle::~Handle() { HandleModels models = take_models(*this); }

HandleModels::HandleModels() = default;
HandleModels::HandleModels(HandleModels&&) noexcept = default;
HandleModels& HandleModels::operator=(HandleModels&&) noexcept = default;

HandleModels::~HandleModels() {
    corpus.reset();
    rag_embedder.reset();
    embedder.reset();
    speech.reset();
    engine.reset();
}

HandleModels take_models(Handle& h) {
    HandleModels m;
    m.corpus = std::move(h.corpus);
    m.rag_embedder = std::move(h.rag_embedder);
    m.embedder = std::move(h.embedder);
    m.speech = std::move(h.speech);
    m.engine = std::move(h.engine);
    return m;
}

void* register_handle(std::shared_ptr<Handle> handle) {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    const uintptr_t id = g_next_id;
    g_next_id += 16;
    g_registry.emplace(id, std::move(handle));
    return reinterpret_cast<void*>(id);
}

std::shared_ptr<Handle> find_handle(void* model) {
    if (model == nullptr) fail("the model handle is NULL");
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    auto it = g_registry.find(reinterpret_cast<uintptr_t>(model));
    if (it == g_registry.end()) fail("the model handle is not valid (destroyed, or never returned by cactus_init)");
    return it->second;
}

std::shared_ptr<Handle> take_handle(void* model) {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    auto it = g_registry.find(reinterpret_cast<uintptr_t>(model));
    if (it == g_registry.end()) fail("the model handle is not valid (already destroyed?)");
    std::shared_ptr<Handle> h = std::move(it->second);
    g_registry.erase(it);
    return h;
}

Lease::Lease(void* model, Use use) : h_(find_handle(model)) {
    std::unique_lock<std::mutex> lock(h_->mutex);
    if (h_->closed || (!h_->engine && !h_->speech && !h_->embedder)) fail("the model handle was destroyed");
    if (const char* why = missing_model(*h_, use)) fail("%s", why);
    const uint64_t entry_epoch = h_->engine ? h_->engine->stop_epoch() : 0;
    if (h_->busy && h_->owner == std::this_thread::get_id()) {
        fail(
            "called from inside a callback of a call on the same handle; calls on a handle do not "
            "nest (return from the callback first; cactus_stop is allowed)");
    }
    if (!h_->idle.wait_for(lock, kHandleWait, [&] { return !h_->busy || h_->closed; })) {
        fail("the handle is busy with another call (waited %lld s)", static_cast<long long>(kHandleWait.count()));
    }
    if (h_->closed) fail("the model handle was destroyed while this call waited for it");
    h_->busy = true;
    h_->owner = std::this_thread::get_id();
    if (h_->engine) h_->engine->begin_call(entry_epoch);
}

Lease::~Lease() {
    HandleModels freed;  // freed last, outside the lock
    {
        std::lock_guard<std::mutex> lock(h_->mutex);
        h_->busy = false;
        h_->owner = std::thread::id();
        if (h_->closed && !h_->destroy_waiting) freed = take_models(*h_);  // destroy did not wait
    }
    h_->idle.notify_all();
}

TextEmbedder& Lease::embedder() const {
    if (!h_->embedder) h_->embedder = TextEmbedder::over_decoder(*h_->engine);
    return *h_->embedder;
}

}  // namespace cactus::api
