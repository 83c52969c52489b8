#pragma once
// A handle on a real model shared by the C API tests of one binary (loading takes a moment).
#include <gtest/gtest.h>

#include <string>

#include "cactus/cactus.h"
#include "common/test_models.h"

namespace cactus::testing {

inline cactus_model_t shared_model(const std::string& name) {
    static std::string loaded_name;
    static cactus_model_t model = nullptr;
    if (model == nullptr || loaded_name != name) {
        if (model != nullptr) cactus_destroy(model);
        model = cactus_init(test_model_path(name).c_str(), nullptr, false);
        loaded_name = name;
    }
    return model;
}

// Runs a short normal completion and returns its rc (> 0 on success).
inline int normal_completion(cactus_model_t model, std::string* response_out = nullptr) {
    static char buffer[1 << 16];
    int rc = cactus_complete(model, R"([{"role":"user","content":"Say hi."}])", buffer, sizeof buffer,
                             R"({"max_tokens":4})", nullptr, nullptr, nullptr, nullptr, 0);
    if (response_out != nullptr) *response_out = buffer;
    return rc;
}

}  // namespace cactus::testing
