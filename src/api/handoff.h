#pragma once
// The cloud hand-off, shared by the C API (cactus_complete) and `cactus serve`: when the local
// model is unsure of its first tokens (mean probability below confidence_threshold), or the caller
// asks for it, the completion goes to an OpenAI-compatible endpoint (CACTUS_HANDOFF_URL,
// CACTUS_HANDOFF_KEY, CACTUS_HANDOFF_MODEL). TLS certificates are verified (CACTUS_HANDOFF_CA names
// an extra CA file, e.g. a test certificate).
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cactus {

struct HandoffConfig {
    std::string url;  // https://host[:port][/v1]; empty = no hand-off
    std::string api_key;
    std::string model;                  // model name sent to the endpoint; empty = the caller's
    std::string ca_file;                // extra CA certificates (PEM); empty = the system's
    double confidence_threshold = 0.7;  // mean probability of the first tokens below this hands off
    size_t confidence_tokens = 8;       // how many first tokens the check looks at
    int timeout_ms = 15000;
    bool auto_handoff = true;  // the confidence check runs unless a request turns it off
};

// Fills the hand-off settings from CACTUS_HANDOFF_* where the config leaves them empty.
void handoff_from_environment(HandoffConfig& config);

class HandoffClient {
public:
    explicit HandoffClient(const HandoffConfig& config);  // fails on a URL without scheme or host
    const HandoffConfig& config() const { return config_; }

    // POSTs body (stream forced off, model replaced when configured) to <url>/<endpoint>
    // ("chat/completions" or "completions"). Returns false with *error on a network error, a
    // non-2xx status or a body that is not a completion. Thread-safe (one connection per call).
    bool post(const std::string& endpoint, nlohmann::ordered_json body, nlohmann::ordered_json* response,
              std::string* error) const;

private:
    HandoffConfig config_;
    std::string origin_;  // scheme://host[:port]
    std::string prefix_;  // path prefix, e.g. /v1
};

// The mean of the first `count` probabilities (all when fewer; 0 for none).
double mean_of_first(const std::vector<float>& probabilities, size_t count);

// The reason reported when the confidence check hands off.
std::string low_confidence_reason(double confidence, double threshold, size_t tokens);

}  // namespace cactus
