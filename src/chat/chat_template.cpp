#include "chat/chat_template.h"

#include "chat/json_parse.h"
#include "chat/template_ast.h"
#include "chat/template_eval.h"
#include "core/error.h"

namespace cactus {

struct ChatTemplate::Impl {
    tmpl::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
    impl_->body = tmpl::parse_template(source);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::json& context) const {
    // nlohmann::json keeps object keys sorted; callers that need insertion order (tool schemas
    // rendered with tojson) use render_ordered().
    check_json_depth(context, "ChatTemplate::render: context");  // dump() below recurses
    return render_ordered(parse_json(context.dump(), "ChatTemplate::render: context"));
}

std::string ChatTemplate::render_ordered(const nlohmann::ordered_json& context) const {
    if (!context.is_object()) fail("ChatTemplate::render: context must be a JSON object, got %s", context.type_name());
    // Each entry (messages, tools, ...) is one of the app's documents: the same limits as parsing.
    for (const auto& entry : context.items()) check_json_depth(entry.value(), "ChatTemplate::render: context entry");
    return tmpl::render_template(impl_->body, tmpl::from_json(context));
}

}  // namespace cactus
