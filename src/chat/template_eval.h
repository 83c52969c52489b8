#pragma once
// Walks a parsed chat template with a context and produces the rendered text.
#include <string>

#include "chat/template_ast.h"

namespace cactus {
namespace tmpl {

// `context` must be a Dict value (the template's variables). Throws cactus::Error on failure,
// including raise_exception() from inside the template.
std::string render_template(const Body& body, const Value& context);

}  // namespace tmpl
}  // namespace cactus
