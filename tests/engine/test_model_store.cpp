#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/error.h"
#include "engine/model_store.h"

using namespace cactus;
namespace fs = std::filesystem;

namespace {

class ModelStoreTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("cactus-store-" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        setenv("CACTUS_MODELS", dir_.c_str(), 1);
    }
    void TearDown() override {
        unsetenv("CACTUS_MODELS");
        fs::remove_all(dir_);
    }
    std::string message_of(const std::string& name) {
        try {
            resolve_model_path(name);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }
    fs::path dir_;
};

}  // namespace

TEST_F(ModelStoreTest, KnownNamesHaveChecksumsAndParts) {
    ASSERT_NE(find_known_model("smollm2-135m"), nullptr);
    ASSERT_NE(find_known_model("gemma3-270m"), nullptr);
    // The default (what `cactus run` loads with no model named) can be pulled and carries a digest.
    const KnownModel* default_model = find_known_model(kDefaultModel);
    ASSERT_NE(default_model, nullptr);
    EXPECT_EQ(default_model->sha256.size(), 64u);
    for (const KnownModel& m : known_models()) {
        // Downloaded files carry a digest; converted ones (Whisper, VAD) are pinned by package version.
        if (m.convert.empty()) {
            EXPECT_EQ(m.sha256.size(), 64u) << m.name;
        }
        EXPECT_FALSE(m.parts.empty());
        EXPECT_GT(m.size_bytes, 0u);
    }
    EXPECT_EQ(model_cache_dir(), dir_.string());
}

TEST_F(ModelStoreTest, ConvertedRowsNameAScriptThatExists) {
    const KnownModel* minilm = find_known_model("all-minilm-l6-v2");
    ASSERT_NE(minilm, nullptr);
    EXPECT_EQ(minilm->convert, "convert_minilm.py");
    for (const KnownModel& m : known_models()) {
        if (m.convert.empty()) continue;
        const std::string script = m.convert.substr(0, m.convert.find(' '));
        EXPECT_EQ(script.rfind(".py"), script.size() - 3) << m.name;
        EXPECT_TRUE(fs::is_regular_file(std::string(CACTUS_SOURCE_DIR) + "/scripts/" + script)) << m.name;
    }
}

TEST_F(ModelStoreTest, MissingKnownModelSaysHowToGetIt) {
    EXPECT_NE(message_of("gemma3-270m").find("cactus pull gemma3-270m"), std::string::npos);
}

TEST_F(ModelStoreTest, UnknownNameListsTheKnownOnes) {
    std::string m = message_of("llama-70b");
    EXPECT_NE(m.find("unknown model 'llama-70b'"), std::string::npos);
    EXPECT_NE(m.find("smollm2-135m"), std::string::npos);
}

TEST_F(ModelStoreTest, PathsAndFoldersResolve) {
    EXPECT_NE(message_of("/no/such/model.gguf").find("does not exist"), std::string::npos);
    fs::path file = dir_ / "smollm2-135m.gguf";
    std::ofstream(file) << "x";
    EXPECT_EQ(resolve_model_path("smollm2-135m"), file.string());
    EXPECT_EQ(resolve_model_path(file.string()), file.string());
    fs::path folder = dir_ / "bundle";
    fs::create_directories(folder);
    EXPECT_NE(message_of(folder.string()).find("holds no .gguf"), std::string::npos);
    std::ofstream(folder / "model.gguf") << "x";
    std::ofstream(folder / "mmproj-model.gguf") << "x";
    EXPECT_EQ(resolve_model_path(folder.string()), (folder / "model.gguf").string());
}

TEST_F(ModelStoreTest, MmprojFromOptionEnvironmentOrFolder) {
    unsetenv("CACTUS_MMPROJ");
    fs::path folder = dir_ / "vlm";
    fs::create_directories(folder);
    std::ofstream(folder / "model.gguf") << "x";
    EXPECT_EQ(resolve_mmproj_path(folder.string()), "");  // a text model alone
    EXPECT_EQ(resolve_mmproj_path((folder / "model.gguf").string()), "");
    std::ofstream(folder / "mmproj-model-f16.gguf") << "x";
    EXPECT_EQ(resolve_mmproj_path(folder.string()), (folder / "mmproj-model-f16.gguf").string());
    EXPECT_EQ(resolve_mmproj_path((folder / "model.gguf").string()), "");  // a file names no projector
    const std::string given = (folder / "mmproj-model-f16.gguf").string();
    EXPECT_EQ(resolve_mmproj_path((folder / "model.gguf").string(), given), given);
    setenv("CACTUS_MMPROJ", given.c_str(), 1);
    EXPECT_EQ(resolve_mmproj_path((folder / "model.gguf").string()), given);
    setenv("CACTUS_MMPROJ", "/no/such/mmproj.gguf", 1);
    try {
        resolve_mmproj_path(folder.string());
        ADD_FAILURE() << "a missing CACTUS_MMPROJ file must be an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("CACTUS_MMPROJ: file '/no/such/mmproj.gguf' does not exist"),
                  std::string::npos)
            << e.what();
    }
    unsetenv("CACTUS_MMPROJ");
    std::ofstream(folder / "other-mmproj.gguf") << "x";
    try {
        resolve_mmproj_path(folder.string());
        ADD_FAILURE() << "two projectors in a folder must be an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("several mmproj"), std::string::npos) << e.what();
    }
}

TEST_F(ModelStoreTest, Sha256OfFile) {
    fs::path file = dir_ / "abc.txt";
    std::ofstream(file) << "abc";
    EXPECT_EQ(sha256_file(file.string()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
