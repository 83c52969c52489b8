#pragma once
// JSON string literals written by hand (the chat templates' tojson renders values in Python's
// json.dumps layout, which nlohmann::json's dump does not produce). Escapes as json.dumps with
// ensure_ascii=False does: the quote, the backslash, \n \r \t \b \f, other control bytes as \u00XX;
// every other byte (UTF-8 included) is copied as it is.
#include <string>

namespace cactus {

// Appends `text` to `out` as a quoted JSON string.
void append_json_string(std::string& out, const std::string& text);
// `text` as a quoted JSON string.
std::string json_string(const std::string& text);

}  // namespace cactus
