#include "kv/kv_options.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace cactus {

namespace {

constexpr size_t kDefaultCompressAt = 4096;
constexpr size_t kDefaultSinks = 4;
constexpr double kDefaultRecent = 0.3;
constexpr KvType kDefaultType = KvType::F16;

}  // namespace

KvType parse_kv_type(const std::string& name) {
    if (name == "f16") return KvType::F16;
    if (name == "int8") return KvType::I8;
    if (name == "f32") return KvType::F32;
    fail("options: 'kv_cache_type' must be \"f16\", \"int8\" or \"f32\" (got \"%s\")", name.c_str());
}

const char* kv_type_name(KvType type) {
    switch (type) {
        case KvType::F16:
            return "f16";
        case KvType::I8:
            return "int8";
        case KvType::F32:
            return "f32";
    }
    return "unknown";
}

KvRequest KvRequest::merged(const KvRequest& over) const {
    KvRequest r = *this;
    if (over.type >= 0) r.type = over.type;
    if (over.compress >= 0) r.compress = over.compress;
    if (over.compress_at != 0) r.compress_at = over.compress_at;
    if (over.compress_to != 0) r.compress_to = over.compress_to;
    if (over.compress_sinks >= 0) r.compress_sinks = over.compress_sinks;
    if (over.compress_recent >= 0.0) r.compress_recent = over.compress_recent;
    return r;
}

KvOptions resolve_kv_options(const KvRequest& request, size_t n_ctx) {
    KvOptions o;
    if (request.type > static_cast<int>(KvType::F32)) {
        fail("options: 'kv_cache_type' %d is not a KV type (f16, int8 or f32)", request.type);
    }
    o.type = request.type >= 0 ? static_cast<KvType>(request.type) : kDefaultType;
    KvCompressOptions& c = o.compress;
    // Like Cactus, compaction is on by default when the context is larger than its trigger; a
    // smaller context keeps every row (and overflowing it is an error) unless asked otherwise.
    c.enabled = request.compress < 0 ? n_ctx > kDefaultCompressAt : request.compress != 0;
    if (!c.enabled) return o;
    c.at = request.compress_at ? request.compress_at : std::min(kDefaultCompressAt, n_ctx);
    c.to = request.compress_to ? request.compress_to : c.at / 2;
    c.sinks = request.compress_sinks >= 0 ? static_cast<size_t>(request.compress_sinks) : kDefaultSinks;
    const double recent = request.compress_recent >= 0.0 ? request.compress_recent : kDefaultRecent;
    if (c.at > n_ctx) {
        fail("options: 'kv_compress_at' (%zu) must be <= n_ctx (%zu)", c.at, n_ctx);
    }
    if (c.to == 0 || c.to >= c.at) {
        fail("options: 'kv_compress_to' (%zu) must be >= 1 and < kv_compress_at (%zu)", c.to, c.at);
    }
    if (!(recent >= 0.0 && recent <= 1.0)) {
        fail("options: 'kv_compress_recent' (%g) must be between 0 and 1", recent);
    }
    c.recent = static_cast<size_t>(std::lround(recent * static_cast<double>(c.to)));
    if (c.sinks > c.to) {
        fail("options: 'kv_compress_sinks' (%zu) must be <= kv_compress_to (%zu)", c.sinks, c.to);
    }
    c.recent = std::min(c.recent, c.to - c.sinks);
    return o;
}

}  // namespace cactus
