// GGUF file lifetime (mmap, from_memory, mlock / anonymous copy) and typed metadata access.
// Parsing and validation live in gguf_parse.cpp.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace cactus {

const char* gguf_type_name(GgufType type) {
    switch (type) {
        case GgufType::U8:
            return "u8";
        case GgufType::I8:
            return "i8";
        case GgufType::U16:
            return "u16";
        case GgufType::I16:
            return "i16";
        case GgufType::U32:
            return "u32";
        case GgufType::I32:
            return "i32";
        case GgufType::F32:
            return "f32";
        case GgufType::BOOL:
            return "bool";
        case GgufType::STRING:
            return "string";
        case GgufType::ARRAY:
            return "array";
        case GgufType::U64:
            return "u64";
        case GgufType::I64:
            return "i64";
        case GgufType::F64:
            return "f64";
    }
    return "unknown";
}

size_t gguf_scalar_size(GgufType type) {
    switch (type) {
        case GgufType::U8:
        case GgufType::I8:
        case GgufType::BOOL:
            return 1;
        case GgufType::U16:
        case GgufType::I16:
            return 2;
        case GgufType::U32:
        case GgufType::I32:
        case GgufType::F32:
            return 4;
        case GgufType::U64:
        case GgufType::I64:
        case GgufType::F64:
            return 8;
        default:
            return 0;
    }
}

size_t GgufValue::array_size() const {
    if (type != GgufType::ARRAY) return 0;
    return array_type == GgufType::STRING ? strings.size() : numbers.size();
}

// ---- lifetime -----------------------------------------------------------------------------------

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
    std::unique_ptr<GgufFile> file(new GgufFile());
    file->path_ = path;
    file->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file->fd_ < 0) fail("gguf: cannot open '%s': %s", path.c_str(), std::strerror(errno));
    struct stat st;
    if (::fstat(file->fd_, &st) != 0) {
        fail("gguf: cannot stat '%s': %s", path.c_str(), std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) fail("gguf: '%s' is not a regular file", path.c_str());
    file->size_ = static_cast<size_t>(st.st_size);
    if (file->size_ > 0) {
        void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, file->fd_, 0);
        if (map == MAP_FAILED) {
            fail("gguf: cannot mmap '%s' (%zu bytes): %s", path.c_str(), file->size_, std::strerror(errno));
        }
        file->base_ = static_cast<const uint8_t*>(map);
        file->mapped_size_ = file->size_;
        file->owns_mapping_ = true;
    }
    try {
        file->parse();
    } catch (const Error& e) {
        fail("%s (file '%s')", e.what(), path.c_str());
    }
    return file;
}

std::unique_ptr<GgufFile> GgufFile::from_memory(const uint8_t* data, size_t size) {
    std::unique_ptr<GgufFile> file(new GgufFile());
    file->path_ = "<memory>";
    file->base_ = data;
    file->size_ = data == nullptr ? 0 : size;
    file->parse();
    return file;
}

void GgufFile::release() {
    if (anonymous_ != nullptr) {
        ::munmap(anonymous_, anonymous_size_);  // unlocks it too
    } else if (locked_) {
        ::munlock(base_ + data_offset_, size_ - static_cast<size_t>(data_offset_));
    }
    anonymous_ = nullptr;
    locked_ = false;
    if (owns_mapping_ && mapped_size_ > 0) ::munmap(const_cast<uint8_t*>(base_), mapped_size_);
    owns_mapping_ = false;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

GgufFile::~GgufFile() { release(); }

// ---- residency ----------------------------------------------------------------------------------

const char* GgufFile::residency() const {
    if (locked_) return "locked";
    return anonymous_ != nullptr ? "anonymous" : "mapped";
}

// The copy sits in transparent huge pages where the kernel allows them: a 1 GB model's decode then
// misses the TLB far less (qwen2.5-coder-1.5b tg64, 1 thread, Zen 5: 34.8 tok/s against 33.2 with
// mlock of the file pages; bench/compare_llama.py). If mlock is refused the copy stays
// unlocked (RLIMIT_MEMLOCK): resident unless the system swaps.
void GgufFile::lock_in_memory() {
    if (locked_ || tensors_.empty()) return;
    if (anonymous_ != nullptr || try_copy_into_anonymous_memory()) {
        // The copy without its holes (kept-mapped tables: never touched, so never resident).
        locked_ = true;
        size_t from = 0;
        std::vector<std::pair<size_t, size_t>> holes = kept_pages();
        holes.emplace_back(anonymous_size_, anonymous_size_);
        for (const auto& [begin, end] : holes) {
            if (begin > from && ::mlock(anonymous_ + from, begin - from) != 0) locked_ = false;
            from = end;
        }
    } else {  // no memory for a copy: lock the file's pages where they are
        locked_ = ::mlock(base_ + data_offset_, size_ - static_cast<size_t>(data_offset_)) == 0;
    }
}

namespace {

// Drops the whole pages of [begin, end) of a read-only file mapping from this process (they come
// back from the file if touched again).
void drop_mapped_pages(const uint8_t* begin, const uint8_t* end) {
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
    const uintptr_t last = reinterpret_cast<uintptr_t>(end) / page * page;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

void GgufFile::release_tensor_bytes(const std::string& name) const {
    auto it = tensor_index_.find(name);
    if (it == tensor_index_.end()) fail("gguf: release_tensor_bytes: no tensor %s", name.c_str());
    if (used_in_place_[it->second] || !owns_mapping_) return;  // !owns_mapping_: an image in memory (tests)
    GgufTensor& t = tensors_[it->second];
    const uint8_t* begin = t.data;
    const uint8_t* end = begin + t.n_bytes;
    const bool in_copy = anonymous_ != nullptr && begin >= anonymous_ && end <= anonymous_ + anonymous_size_;
    if (!in_copy) {
        drop_mapped_pages(begin, end);
        return;
    }
    t.data = base_ + data_offset_ + t.offset;  // the same bytes, in the file mapping
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
    const uintptr_t last = reinterpret_cast<uintptr_t>(end) / page * page;
    if (last <= first) return;
    void* pages = reinterpret_cast<void*>(first);
    if (locked_) ::munlock(pages, last - first);
    ::madvise(pages, last - first, MADV_DONTNEED);  // anonymous: freed (zero if touched again)
}

const GgufTensor& GgufFile::keep_mapped(const std::string& name) const {
    auto it = tensor_index_.find(name);
    if (it == tensor_index_.end()) fail("gguf: keep_mapped: no tensor %s", name.c_str());
    GgufTensor& t = tensors_[it->second];
    used_in_place_[it->second] = true;
    kept_mapped_[it->second] = true;
    if (!owns_mapping_) return t;
    const uint8_t* begin = t.data;
    const uint8_t* end = begin + t.n_bytes;
    const bool in_copy = anonymous_ != nullptr && begin >= anonymous_ && end <= anonymous_ + anonymous_size_;
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
    const uintptr_t last = reinterpret_cast<uintptr_t>(end) / page * page;
    if (in_copy) t.data = base_ + data_offset_ + t.offset;  // the same bytes, in the file mapping
    if (last <= first) return t;
    void* pages = reinterpret_cast<void*>(first);
    if (locked_) ::munlock(pages, last - first);  // the copy's pages, or the file's locked in place
    if (in_copy) ::madvise(pages, last - first, MADV_DONTNEED);
    return t;
}

void GgufFile::note_direct_use(const std::string& name) const {
    auto it = tensor_index_.find(name);
    if (it == tensor_index_.end()) fail("gguf: note_direct_use: no tensor %s", name.c_str());
    used_in_place_[it->second] = true;
}

void GgufFile::copy_into_anonymous_memory() {
    if (anonymous_ != nullptr || tensors_.empty()) return;
    if (!try_copy_into_anonymous_memory()) {
        fail("gguf: cannot allocate %zu bytes of anonymous memory for '%s': %s",
             size_ - static_cast<size_t>(data_offset_), path_.c_str(), std::strerror(errno));
    }
}

std::vector<std::pair<size_t, size_t>> GgufFile::kept_pages() const {
    std::vector<std::pair<size_t, size_t>> pages;
    if (!owns_mapping_) return pages;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    // The data section starts page-aligned in the copy, not in the file: offsets are the copy's.
    for (size_t i = 0; i < tensors_.size(); ++i) {
        if (!kept_mapped_[i]) continue;
        const size_t begin = (static_cast<size_t>(tensors_[i].offset) + page - 1) / page * page;
        const size_t end = static_cast<size_t>(tensors_[i].offset + tensors_[i].n_bytes) / page * page;
        if (end > begin) pages.emplace_back(begin, end);
    }
    std::sort(pages.begin(), pages.end());
    return pages;
}

bool GgufFile::try_copy_into_anonymous_memory() {
    size_t length = size_ - static_cast<size_t>(data_offset_);
    void* copy = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) return false;
    ::madvise(copy, length, MADV_HUGEPAGE);  // a hint: ignored where THP is off
    if (locked_) ::munlock(base_ + data_offset_, length);
    locked_ = false;
    // In slices, each dropped from the file mapping once copied: the peak RSS stays one copy.
    // Kept-mapped tables are left out: their pages of the copy are never touched.
    constexpr size_t kSlice = size_t{64} << 20;
    const uint8_t* source = base_ + data_offset_;
    size_t from = 0;
    std::vector<std::pair<size_t, size_t>> holes = kept_pages();
    holes.emplace_back(length, length);
    for (const auto& [begin, end] : holes) {
        for (size_t done = from; done < begin; done += kSlice) {
            const size_t n = std::min(kSlice, begin - done);
            std::memcpy(static_cast<uint8_t*>(copy) + done, source + done, n);
            if (owns_mapping_) drop_mapped_pages(source + done, source + done + n);
        }
        from = std::max(from, end);
    }
    anonymous_ = static_cast<uint8_t*>(copy);
    anonymous_size_ = length;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        tensors_[i].data = (kept_mapped_[i] ? base_ + data_offset_ : anonymous_) + tensors_[i].offset;
    }
    return true;
}

// ---- metadata access ----------------------------------------------------------------------------

const GgufValue* GgufFile::find(const std::string& key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

bool is_integer_type(GgufType t) {
    switch (t) {
        case GgufType::U8:
        case GgufType::I8:
        case GgufType::U16:
        case GgufType::I16:
        case GgufType::U32:
        case GgufType::I32:
        case GgufType::U64:
        case GgufType::I64:
            return true;
        default:
            return false;
    }
}

bool is_signed_type(GgufType t) {
    return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}

const GgufValue& require(const GgufFile& file, const std::string& key) {
    const GgufValue* v = file.find(key);
    if (v == nullptr) fail("gguf: metadata key '%s' is missing", key.c_str());
    return *v;
}

[[noreturn]] void wrong_type(const std::string& key, const GgufValue& v, const char* expected) {
    fail("gguf: metadata '%s' has type %s, expected %s", key.c_str(), gguf_type_name(v.type), expected);
}

uint64_t as_uint(const std::string& key, const GgufValue& v) {
    if (!is_integer_type(v.type)) wrong_type(key, v, "a non-negative integer");
    if (is_signed_type(v.type) && v.i < 0) {
        fail("gguf: metadata '%s' = %lld is negative, expected a non-negative integer", key.c_str(),
             static_cast<long long>(v.i));
    }
    return v.u;
}

double as_float(const std::string& key, const GgufValue& v) {
    if (v.type == GgufType::F32 || v.type == GgufType::F64 || is_integer_type(v.type)) return v.f;
    wrong_type(key, v, "a number");
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
    const GgufValue& v = require(*this, key);
    if (v.type != GgufType::STRING) wrong_type(key, v, "string");
    return v.str;
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
    return has(key) ? get_string(key) : fallback;
}

uint64_t GgufFile::get_uint(const std::string& key) const { return as_uint(key, require(*this, key)); }

uint64_t GgufFile::get_uint(const std::string& key, uint64_t fallback) const {
    const GgufValue* v = find(key);
    return v == nullptr ? fallback : as_uint(key, *v);
}

double GgufFile::get_float(const std::string& key) const { return as_float(key, require(*this, key)); }

double GgufFile::get_float(const std::string& key, double fallback) const {
    const GgufValue* v = find(key);
    return v == nullptr ? fallback : as_float(key, *v);
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return fallback;
    if (v->type != GgufType::BOOL) wrong_type(key, *v, "bool");
    return v->i != 0;
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
    const GgufValue& v = require(*this, key);
    if (v.type != GgufType::ARRAY || v.array_type != GgufType::STRING) {
        wrong_type(key, v, "array of string");
    }
    return v.strings;
}

const GgufValue& GgufFile::get_array(const std::string& key) const {
    const GgufValue& v = require(*this, key);
    if (v.type != GgufType::ARRAY) wrong_type(key, v, "array");
    return v;
}

}  // namespace cactus
