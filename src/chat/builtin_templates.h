#pragma once
// Chat templates for model families whose GGUF files carry none (base models such as
// gemma-3-270m): Jinja sources rendered by the same engine as templates read from files.
#include <string>

namespace cactus {

// The template for `architecture` (gemma4: the E2B/E4B template; other gemma*: Gemma 3's turn
// format), or ChatML when the family has no known format.
const std::string& builtin_chat_template(const std::string& architecture);

// A template by the name llama-server gives it (--chat-template chatml): nullptr for a name we
// do not carry; builtin_chat_template_names() lists those we do.
const std::string* builtin_chat_template_named(const std::string& name);
const char* builtin_chat_template_names();

}  // namespace cactus
