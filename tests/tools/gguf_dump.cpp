// Probe for tests/gguf/test_gguf_oracle.py: prints a GGUF file as JSON as our reader sees it.
//   gguf_dump <file.gguf>
// {"version", "alignment", "data_offset", "metadata": {key: {"type", "value"} |
//  {"type": "array", "array_type", "values"}}, "tensors": [{"name", "type", "dims", "offset",
//  "n_elements", "n_bytes", "crc32"}]}. Strings are hex-encoded bytes (they need not be UTF-8).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"

namespace {

using nlohmann::json;

std::string hex(const std::string& s) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) {
        out.push_back(digits[c >> 4]);
        out.push_back(digits[c & 15]);
    }
    return out;
}

uint32_t crc32(const uint8_t* data, uint64_t n) {
    static uint32_t table[256];
    static bool ready = false;
    if (!ready) {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = true;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (uint64_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

bool is_float(cactus::GgufType t) { return t == cactus::GgufType::F32 || t == cactus::GgufType::F64; }
bool is_signed(cactus::GgufType t) {
    using T = cactus::GgufType;
    return t == T::I8 || t == T::I16 || t == T::I32 || t == T::I64;
}

json scalar(const cactus::GgufValue& v) {
    if (v.type == cactus::GgufType::STRING) return hex(v.str);
    if (is_float(v.type)) return v.f;
    if (v.type == cactus::GgufType::BOOL) return v.i != 0;
    if (is_signed(v.type)) return v.i;
    return v.u;
}

json value_json(const cactus::GgufValue& v) {
    json out;
    out["type"] = cactus::gguf_type_name(v.type);
    if (v.type != cactus::GgufType::ARRAY) {
        out["value"] = scalar(v);
        return out;
    }
    out["array_type"] = cactus::gguf_type_name(v.array_type);
    json values = json::array();
    if (v.array_type == cactus::GgufType::STRING) {
        for (const std::string& s : v.strings) values.push_back(hex(s));
    } else if (is_float(v.array_type)) {
        for (double d : v.numbers) values.push_back(d);
    } else if (v.array_type == cactus::GgufType::BOOL) {
        for (int64_t x : v.ints) values.push_back(x != 0);
    } else if (v.array_type == cactus::GgufType::U64) {
        for (int64_t x : v.ints) values.push_back(static_cast<uint64_t>(x));
    } else {
        for (int64_t x : v.ints) values.push_back(x);
    }
    out["values"] = std::move(values);
    return out;
}

json dump(const cactus::GgufFile& f) {
    json out;
    out["version"] = f.version();
    out["alignment"] = f.alignment();
    out["data_offset"] = f.data_offset();
    json metadata = json::object();
    for (const auto& [key, value] : f.metadata()) metadata[key] = value_json(value);
    out["metadata"] = std::move(metadata);
    json tensors = json::array();
    for (const cactus::GgufTensor& t : f.tensors()) {
        tensors.push_back({{"name", t.name},
                           {"type", static_cast<uint32_t>(t.type)},
                           {"type_name", cactus::dtype_name(t.type)},
                           {"dims", t.dims},
                           {"offset", t.offset},
                           {"n_elements", t.n_elements},
                           {"n_bytes", t.n_bytes},
                           {"crc32", crc32(t.data, t.n_bytes)}});
    }
    out["tensors"] = std::move(tensors);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: gguf_dump <file.gguf>\n");
        return 2;
    }
    try {
        auto file = cactus::GgufFile::open(argv[1]);
        std::string text = dump(*file).dump(-1, ' ', true);
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fputc('\n', stdout);
    } catch (const cactus::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
