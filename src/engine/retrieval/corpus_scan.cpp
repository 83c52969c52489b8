#include "engine/retrieval/corpus_scan.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace cactus {

namespace {

constexpr uint64_t kMaxFileBytes = uint64_t(1) << 30;

bool has_suffix(const std::string& s, const char* suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

int64_t mtime_ns(const struct stat& st) {
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::vector<std::string> list_names(const std::string& dir) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) fail("CorpusIndex: cannot read the corpus folder %s: %s", dir.c_str(), std::strerror(errno));
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (has_suffix(name, ".txt") || has_suffix(name, ".md")) names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace

CorpusScan scan_corpus(const std::string& corpus_dir) {
    char resolved[PATH_MAX];
    if (corpus_dir.empty() || realpath(corpus_dir.c_str(), resolved) == nullptr) {
        fail("CorpusIndex: corpus folder '%s': %s", corpus_dir.c_str(), std::strerror(errno));
    }
    CorpusScan scan;
    scan.corpus_abs = resolved;
    struct stat st;
    if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) fail("CorpusIndex: '%s' is not a folder", resolved);
    for (const std::string& name : list_names(scan.corpus_abs)) {
        std::string path = scan.corpus_abs + "/" + name;
        struct stat before, after;
        if (stat(path.c_str(), &before) != 0) {
            fail("CorpusIndex: cannot read %s in the corpus: %s", name.c_str(), std::strerror(errno));
        }
        if (!S_ISREG(before.st_mode)) continue;  // a folder or device named *.txt is not a note
        std::string bytes;
        if (!read_file_bytes(path, &bytes, kMaxFileBytes)) {
            fail("CorpusIndex: cannot read %s in the corpus: %s", name.c_str(), std::strerror(errno));
        }
        bool same = stat(path.c_str(), &after) == 0 && after.st_size == before.st_size &&
                    mtime_ns(after) == mtime_ns(before) && bytes.size() == static_cast<uint64_t>(before.st_size);
        if (!same) scan.changed_while_reading.push_back(name);
        scan.files.push_back({name, static_cast<uint64_t>(before.st_size), mtime_ns(before), sha256_hex(bytes)});
        scan.contents.push_back(std::move(bytes));
    }
    return scan;
}

}  // namespace cactus
