#pragma once
// KV cache settings: the storage precision and the rolling KeyDiff compaction of global layers.
// A request (from the C API options) may leave any field unset; resolve_kv_options() fills the
// defaults for a given context size and checks the combination, with errors naming the option key.
#include <cstddef>
#include <cstdint>
#include <string>

namespace cactus {

// Row storage: IEEE half (the default), int8 with one f32 scale per group of kKvGroup elements, or
// f32 (4 bytes per element: attention at float precision, for comparisons with f32 oracles).
enum class KvType { F16, I8, F32 };

// "f16" | "int8" | "f32"; throws naming the key kv_cache_type otherwise.
KvType parse_kv_type(const std::string& name);
const char* kv_type_name(KvType type);

// Elements per int8 quantization group (along the head dimension; groups never cross heads).
constexpr size_t kKvGroup = 32;

// What a user asked for; unset fields (-1 / 0) take the defaults.
struct KvRequest {
    int type = -1;           // -1 unset, else static_cast<int>(KvType)
    int compress = -1;       // -1 unset, 0 off, 1 on
    size_t compress_at = 0;  // 0 unset
    size_t compress_to = 0;  // 0 unset
    int64_t compress_sinks = -1;
    double compress_recent = -1.0;  // fraction of compress_to kept as the most recent rows

    bool operator==(const KvRequest& o) const {
        return type == o.type && compress == o.compress && compress_at == o.compress_at &&
               compress_to == o.compress_to && compress_sinks == o.compress_sinks &&
               compress_recent == o.compress_recent;
    }
    // Fields set in `over` replace ours.
    KvRequest merged(const KvRequest& over) const;
};

struct KvCompressOptions {
    bool enabled = false;
    size_t at = 0;      // a global layer holding this many rows is compacted ...
    size_t to = 0;      // ... down to this many
    size_t sinks = 0;   // first rows always kept
    size_t recent = 0;  // most recent rows always kept (rows, resolved from the fraction)
};

struct KvOptions {
    KvType type = KvType::F16;
    KvCompressOptions compress;
};

// Defaults (as Cactus): compaction at min(4096, n_ctx) rows down to at / 2, 4 sinks, 30% recent,
// on when n_ctx > 4096 (a smaller context keeps all rows unless kv_compress is set); storage f16;
// a type outside KvType is an error naming kv_cache_type. Checks 1 <= to < at <= n_ctx, sinks + recent <= to, recent in [0, 1].
KvOptions resolve_kv_options(const KvRequest& request, size_t n_ctx);

}  // namespace cactus
