#include "api/handoff.h"

#include <algorithm>
#include <cstdlib>

#include <httplib.h>

#include "core/error.h"
#include "core/format.h"

namespace cactus {

namespace {

void from_env(std::string& field, const char* name) {
    const char* v = std::getenv(name);
    if (field.empty() && v != nullptr) field = v;
}

}  // namespace

void handoff_from_environment(HandoffConfig& config) {
    from_env(config.url, "CACTUS_HANDOFF_URL");
    from_env(config.api_key, "CACTUS_HANDOFF_KEY");
    from_env(config.model, "CACTUS_HANDOFF_MODEL");
    from_env(config.ca_file, "CACTUS_HANDOFF_CA");
}

HandoffClient::HandoffClient(const HandoffConfig& config) : config_(config) {
    const std::string& url = config_.url;
    const size_t scheme_end = url.find("://");
    if (scheme_end == std::string::npos) fail("hand-off: the URL '%s' has no scheme (https://...)", url.c_str());
    const std::string scheme = url.substr(0, scheme_end);
    if (scheme != "https" && scheme != "http")
        fail("hand-off: the URL '%s' must start with https:// (or http:// for tests)", url.c_str());
    const size_t path_start = url.find('/', scheme_end + 3);
    origin_ = url.substr(0, path_start);
    prefix_ = path_start == std::string::npos ? "/v1" : url.substr(path_start);
    while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
    if (origin_.size() <= scheme_end + 3) fail("hand-off: the URL '%s' has no host", url.c_str());
}

bool HandoffClient::post(const std::string& endpoint, nlohmann::ordered_json body, nlohmann::ordered_json* response,
                         std::string* error) const {
    body["stream"] = false;
    body.erase("stream_options");
    for (const char* ours : {"cloud_handoff", "auto_handoff", "confidence_threshold"}) body.erase(ours);
    if (!config_.model.empty()) body["model"] = config_.model;

    httplib::Client client(origin_);
    if (!client.is_valid()) {
        *error = "hand-off: cannot use the URL " + origin_;
        return false;
    }
    client.enable_server_certificate_verification(true);
    if (!config_.ca_file.empty()) client.set_ca_cert_path(config_.ca_file.c_str());
    const time_t sec = config_.timeout_ms / 1000;
    const time_t usec = static_cast<time_t>(config_.timeout_ms % 1000) * 1000;
    client.set_connection_timeout(sec, usec);
    client.set_read_timeout(sec, usec);
    client.set_write_timeout(sec, usec);
    httplib::Headers headers;
    if (!config_.api_key.empty()) headers.emplace("Authorization", "Bearer " + config_.api_key);

    const std::string path = prefix_ + "/" + endpoint;
    httplib::Result result = client.Post(path.c_str(), headers, body.dump(), "application/json");
    if (!result) {
        *error = "hand-off to " + origin_ + " failed: " + httplib::to_string(result.error());
        const long verify = client.get_openssl_verify_result();
        if (verify != 0) *error += " (certificate: " + std::string(X509_verify_cert_error_string(verify)) + ")";
        return false;
    }
    if (result->status < 200 || result->status >= 300) {
        *error = "hand-off to " + origin_ + " answered HTTP " + std::to_string(result->status);
        return false;
    }
    try {
        *response = nlohmann::ordered_json::parse(result->body);
    } catch (const std::exception& e) {
        *error = "hand-off: the answer is not JSON: " + std::string(e.what());
        return false;
    }
    const auto& choices = (*response)["choices"];
    if (!choices.is_array() || choices.empty() || !choices[0].is_object()) {
        *error = "hand-off: the answer has no choices";
        return false;
    }
    return true;
}

double mean_of_first(const std::vector<float>& probabilities, size_t count) {
    const size_t n = std::min(count, probabilities.size());
    if (n == 0) return 0.0;
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += probabilities[i];
    return sum / static_cast<double>(n);
}

std::string low_confidence_reason(double confidence, double threshold, size_t tokens) {
    return cactus::format("confidence %.3f below %.3f over the first %zu tokens", confidence, threshold, tokens);
}

}  // namespace cactus
