#pragma once
// Where tests find the real models: $CACTUS_MODELS or ~/.cache/cactus/models (scripts/test.sh
// pulls them first). A missing model fails the test; it is never skipped.
#include <cstdlib>
#include <string>
#include <sys/stat.h>

#include <gtest/gtest.h>

namespace cactus::testing {

inline std::string test_model_path(const std::string& name) {
    const char* env = std::getenv("CACTUS_MODELS");
    std::string dir = env != nullptr && env[0] ? env : std::string(std::getenv("HOME")) + "/.cache/cactus/models";
    std::string path = dir + "/" + name + ".gguf";
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        ADD_FAILURE() << "model " << path << " is missing; run: build/bin/cactus pull " << name;
    }
    return path;
}

}  // namespace cactus::testing
