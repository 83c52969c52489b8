#pragma once
// Renders a model's chat template (tokenizer.chat_template, a Jinja2 subset) with a context such
// as {messages, tools, add_generation_prompt, bos_token, eos_token}. Unsupported syntax is a
// cactus::Error naming the construct and its line.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace cactus {

class ChatTemplate {
public:
    explicit ChatTemplate(const std::string& source);  // parses once; throws on bad syntax
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    std::string render(const nlohmann::json& context) const;
    // Same, keeping the context's object key order (as Python dicts do): tojson of tool schemas
    // must list keys in the order the caller gave them.
    std::string render_ordered(const nlohmann::ordered_json& context) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cactus
