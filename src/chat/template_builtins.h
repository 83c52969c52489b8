#pragma once
// Built-in filters, tests, methods and global functions of the chat-template engine, each with
// the semantics of jinja2 (as configured by transformers) so renders match byte for byte.
#include <string>

#include "chat/template_value.h"

namespace cactus {
namespace tmpl {

// `input | name(args)`; throws cactus::Error for an unknown filter or bad arguments.
Value apply_filter(const std::string& name, const Value& input, const CallArgs& args, int line);
// `input is name(args)`.
bool apply_test(const std::string& name, const Value& input, const CallArgs& args, int line);
// `object.name` as a bound method (string, dict and list methods); Kind::Undefined if none.
Value bound_method(const Value& object, const std::string& name);
// Functions visible to every template: range, namespace, dict, raise_exception, strftime_now.
void add_globals(Dict& globals);

// Python iteration: list items, dict keys, string characters; Undefined iterates as empty.
ValueList iterate(const Value& v, int line);
// Python slicing of a list or string with optional bounds (nullptr = omitted).
Value slice_value(const Value& target, const Value* start, const Value* stop, const Value* step, int line);
// Python len().
int64_t length_of(const Value& v, int line);

}  // namespace tmpl
}  // namespace cactus
