#pragma once
// What every C API entry point shares: no exception crosses into C (guarded), errors are kept per
// thread for cactus_get_last_error(), responses are written whole or not at all.
#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "cactus/cactus.h"

namespace cactus::api {

// The calling thread's last error ("" when the last call succeeded).
std::string& last_error();
// Sets the last error; invalid UTF-8 in it (quoted hostile input) becomes U+FFFD.
void set_error(const std::string& message);
// JSON text with invalid UTF-8 replaced.
std::string dump(const nlohmann::ordered_json& j);

// Runs body, turning every exception into -1 and a last-error message prefixed with `function`.
template <typename Body>
int guarded(const char* function, Body&& body) {
    try {
        last_error().clear();
        return body();
    } catch (const std::bad_alloc&) {
        set_error(std::string(function) + ": out of memory");
    } catch (const std::exception& e) {
        set_error(std::string(function) + ": " + e.what());
    } catch (...) {
        set_error(std::string(function) + ": unknown error");
    }
    return CACTUS_ERROR;
}

// Throws for a NULL or empty response buffer.
void check_buffer(const char* buffer, size_t size);
// Writes an error response when it fits; returns -1 either way.
int fail_into(char* buffer, size_t size);
// Writes the response; -2 (with the size needed in the last error) when it does not fit.
int finish_write(const nlohmann::ordered_json& response, char* buffer, size_t size);

}  // namespace cactus::api
