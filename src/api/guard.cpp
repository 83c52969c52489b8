// Error handling and response writing shared by the C API's entry points (api/guard.h).
#include "api/guard.h"

#include "api/response.h"
#include "chat/json_parse.h"
#include "core/error.h"
#include "core/log.h"

namespace cactus::api {

namespace {

thread_local std::string t_last_error;

std::string valid_utf8(const std::string& text) {
    std::string quoted = nlohmann::ordered_json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return parse_json(quoted, "error message").get<std::string>();
}

}  // namespace

std::string& last_error() { return t_last_error; }

void set_error(const std::string& message) {
    t_last_error = valid_utf8(message);
    CACTUS_LOG_DEBUG("%s", message.c_str());
}

std::string dump(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_buffer(const char* buffer, size_t size) {
    if (buffer == nullptr) fail("response_buffer is NULL");
    if (size == 0) fail("buffer_size is 0");
}

int fail_into(char* buffer, size_t size) {
    if (buffer != nullptr && size > 0) write_text(dump(error_response(t_last_error)), buffer, size);
    return CACTUS_ERROR;
}

int finish_write(const nlohmann::ordered_json& response, char* buffer, size_t size) {
    std::string text = dump(response);
    int written = write_text(text, buffer, size);
    if (written == CACTUS_BUFFER_TOO_SMALL)
        set_error("response needs " + std::to_string(text.size() + 1) + " bytes but buffer_size is " +
                  std::to_string(size));
    return written;
}

}  // namespace cactus::api
