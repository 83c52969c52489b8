// cactus_init with a corpus folder and cactus_rag_query on a real model: the right file comes
// first, the Cactus return contract, and completions grounded in the chunks with their sources.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cactus/cactus.h"
#include "common/test_models.h"

namespace cactus::testing {
namespace {

namespace fs = std::filesystem;

class CapiRag : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = fs::temp_directory_path() / ("cactus_rag_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        write("penguins.md",
              "# Penguins\n\nEmperor penguins dive to 500 metres and hold their breath for over twenty minutes "
              "while they hunt fish and squid under the Antarctic ice.\n");
        write("volcanoes.txt",
              "Shield volcanoes such as Mauna Loa are built by fluid basalt lava flows.\n\n"
              "Stratovolcanoes erupt explosively because their magma is viscous and rich in gas.\n");
        write("bread.md",
              "# Sourdough\n\nA sourdough starter is flour and water fermented by wild yeast and "
              "lactic acid bacteria; feed it daily.\n");
        write("ignored.csv", "not,a,note\n");
        model_ = cactus_init(test_model_path("all-minilm-l6-v2").c_str(), dir_.c_str(), true);
        ASSERT_NE(model_, nullptr) << cactus_get_last_error();
    }
    static void TearDownTestSuite() {
        cactus_destroy(model_);
        fs::remove_all(dir_);
    }
    static void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
    static nlohmann::json query(const char* text, size_t top_k, int* rc_out = nullptr) {
        static char buffer[1 << 16];
        const int rc = cactus_rag_query(model_, text, buffer, sizeof buffer, top_k);
        if (rc_out) *rc_out = rc;
        EXPECT_GE(rc, 0) << cactus_get_last_error();
        return rc >= 0 ? nlohmann::json::parse(buffer) : nlohmann::json();
    }
    static fs::path dir_;
    static cactus_model_t model_;
};
fs::path CapiRag::dir_;
cactus_model_t CapiRag::model_ = nullptr;

TEST_F(CapiRag, TheRelevantFileComesFirst) {
    int rc = 0;
    const nlohmann::json r = query("How deep can emperor penguins dive?", 2, &rc);
    EXPECT_GT(rc, 0);
    ASSERT_EQ(r.at("chunks").size(), 2u);
    EXPECT_EQ(r["chunks"][0].at("source"), "penguins.md");
    EXPECT_NE(r["chunks"][0].at("content").get<std::string>().find("500 metres"), std::string::npos);
    EXPECT_GT(r["chunks"][0].at("score").get<double>(), r["chunks"][1].at("score").get<double>());
    const nlohmann::json volcano = query("why do some volcanoes explode", 1);
    EXPECT_EQ(volcano["chunks"][0]["source"], "volcanoes.txt");
    const nlohmann::json all = query("anything", 10);  // a named result: the loop must not outlive it
    for (const auto& c : all["chunks"]) EXPECT_NE(c["source"], "ignored.csv");
}

TEST_F(CapiRag, ContractForBadQueries) {
    int rc = -7;
    const nlohmann::json empty = query("", 5, &rc);
    EXPECT_EQ(rc, 0);
    EXPECT_TRUE(empty.at("chunks").empty());
    EXPECT_EQ(empty.at("error"), "Empty query");
    char small[8];
    EXPECT_EQ(cactus_rag_query(model_, "penguins", small, sizeof small, 5), CACTUS_ERROR);
    EXPECT_EQ(cactus_rag_query(model_, nullptr, small, sizeof small, 5), CACTUS_ERROR);
    EXPECT_EQ(cactus_rag_query(nullptr, "penguins", small, sizeof small, 5), CACTUS_ERROR);
}

TEST_F(CapiRag, HandleWithoutCorpusSaysSo) {
    cactus_model_t plain = cactus_init(test_model_path("all-minilm-l6-v2").c_str(), nullptr, false);
    ASSERT_NE(plain, nullptr) << cactus_get_last_error();
    char buffer[512];
    EXPECT_EQ(cactus_rag_query(plain, "penguins", buffer, sizeof buffer, 5), 0);
    EXPECT_NE(std::string(buffer).find("No corpus index loaded"), std::string::npos);
    cactus_destroy(plain);
}

TEST_F(CapiRag, MissingFolderFailsInit) {
    EXPECT_EQ(cactus_init(test_model_path("all-minilm-l6-v2").c_str(), "/nonexistent/notes", true), nullptr);
    EXPECT_NE(std::string(cactus_get_last_error()).find("/nonexistent/notes"), std::string::npos);
}

TEST_F(CapiRag, ChatPromptIsGroundedWithSources) {
    // A chat model over the same folder (the pulled MiniLM embeds it): the last user message
    // carries the chunks and their sources.
    cactus_model_t chat = cactus_init(test_model_path("smollm2-135m").c_str(), dir_.c_str(), true);
    ASSERT_NE(chat, nullptr) << cactus_get_last_error();
    static char prompt[1 << 16];
    const char* messages = R"([{"role":"user","content":"How long can emperor penguins hold their breath?"}])";
    ASSERT_GT(cactus_render_prompt(chat, messages, nullptr, nullptr, prompt, sizeof prompt), 0)
        << cactus_get_last_error();
    const std::string text = prompt;
    EXPECT_NE(text.find("(Source: penguins.md)"), std::string::npos) << text;
    EXPECT_LT(text.find("twenty minutes"), text.find("How long can emperor penguins"));
    static char response[1 << 16];
    EXPECT_GT(cactus_complete(chat, messages, response, sizeof response, R"({"max_tokens":8})", nullptr, nullptr,
                              nullptr, nullptr, 0),
              0)
        << cactus_get_last_error();
    cactus_destroy(chat);
}

}  // namespace
}  // namespace cactus::testing
