#include "chat/builtin_templates.h"

namespace cactus {

namespace {

// Gemma 3 instruction format; system text is folded into the first user turn as Gemma does.
// Tool definitions and tool results, which Gemma's format has no roles for, are rendered as text
// in the user turns so that requests with tools still render.
const std::string kGemmaTemplate = R"TPL({{ bos_token }}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set first_user_prefix = '' -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- if tools -%}
{%- set ns = namespace(text='You can call these tools. To call one, answer with a JSON object {"name": ..., "arguments": {...}}.\n') -%}
{%- for tool in tools -%}
{%- set ns.text = ns.text + (tool | tojson) + '\n' -%}
{%- endfor -%}
{%- set first_user_prefix = first_user_prefix + ns.text + '\n' -%}
{%- endif -%}
{%- for message in loop_messages -%}
{%- if message['role'] == 'assistant' -%}
{%- set role = 'model' -%}
{%- else -%}
{%- set role = 'user' -%}
{%- endif -%}
{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}
{%- if message['role'] == 'tool' -%}
{{ 'Tool result: ' }}
{%- endif -%}
{%- if message['content'] is string -%}
{{ message['content'] | trim }}
{%- elif message['content'] is iterable -%}
{%- for item in message['content'] -%}
{%- if item['type'] == 'text' -%}
{{ item['text'] | trim }}
{%- endif -%}
{%- endfor -%}
{%- endif -%}
{%- if message['tool_calls'] -%}
{%- for call in message['tool_calls'] -%}
{{ '{"name": "' + call['function']['name'] + '", "arguments": ' + (call['function']['arguments'] | tojson) + '}' }}
{%- endfor -%}
{%- endif -%}
{{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<start_of_turn>model\n' }}
{%- endif -%}
)TPL";

const std::string kChatMLTemplate = R"TPL({%- for message in messages -%}
{{ '<|im_start|>' + message['role'] + '\n' }}
{%- if message['content'] is string -%}
{{ message['content'] }}
{%- else -%}
{%- for item in message['content'] -%}
{%- if item['type'] == 'text' -%}{{ item['text'] }}{%- endif -%}
{%- endfor -%}
{%- endif -%}
{{ '<|im_end|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<|im_start|>assistant\n' }}
{%- endif -%}
)TPL";

}  // namespace

const std::string& builtin_chat_template(const std::string& architecture) {
    if (architecture.rfind("gemma", 0) == 0) return kGemmaTemplate;
    return kChatMLTemplate;
}

}  // namespace cactus
