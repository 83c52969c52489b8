"""Hand-built Gemma 4 conversations for the template oracle (tests/chat/test_gemma4_template.py).

Each case is (name, context) for tests/chat/templates/gemma4_e2b.jinja: system and developer
turns, 20 tools with nested object / array / enum / nullable parameters, assistant tool calls with
arguments of every JSON type, tool results (strings, JSON objects, content parts), parallel calls,
reasoning in the current tool loop and in earlier turns, thinking on and off, several turns,
generation prompt on and off, consecutive assistant messages, and inputs the template rejects.
"""


def fn(name, description, parameters=None, **extra):
    function = {"name": name, "description": description}
    if parameters is not None:
        function["parameters"] = parameters
    function.update(extra)
    return {"type": "function", "function": function}


def obj(properties, required=None, **extra):
    schema = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    schema.update(extra)
    return schema


TOOLS = [
    fn("get_weather", "Current weather for a city.",
       obj({"city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
           ["city"])),
    fn("get_time", "Local time in a city.", obj({"city": {"type": "string"}}, ["city"])),
    fn("search_web", "Search the web.",
       obj({"query": {"type": "string", "description": "What to look for"},
            "max_results": {"type": "integer", "description": "At most this many", "minimum": 1, "maximum": 50},
            "safe": {"type": "boolean"}}, ["query"])),
    fn("create_event", "Add an event to the calendar.",
       obj({"title": {"type": "string"},
            "start": {"type": "string", "description": "ISO 8601 time"},
            "attendees": {"type": "array", "description": "People invited",
                          "items": {"type": "object",
                                    "properties": {"name": {"type": "string"},
                                                   "email": {"type": "string", "nullable": True},
                                                   "role": {"type": "string", "enum": ["host", "guest"]}},
                                    "required": ["name"]}},
            "location": {"type": "object", "description": "Where",
                         "properties": {"room": {"type": "string"}, "floor": {"type": "integer"}},
                         "required": ["room"]}},
           ["title", "start"])),
    fn("send_email", "Send an email.",
       obj({"to": {"type": "array", "items": {"type": "string"}},
            "subject": {"type": "string"}, "body": {"type": "string"},
            "cc": {"type": "array", "items": {"type": "string"}, "nullable": True},
            "priority": {"type": "string", "enum": ["low", "normal", "high"]}},
           ["to", "subject", "body"])),
    fn("set_alarm", "Set an alarm.",
       obj({"time": {"type": "string"}, "repeat": {"type": "array", "items": {"type": "string", "enum": ["mon", "tue", "wed"]}},
            "label": {"type": "string", "nullable": True}}, ["time"])),
    fn("convert_currency", "Convert money.",
       obj({"amount": {"type": "number"}, "from": {"type": "string"}, "to": {"type": "string"}},
           ["amount", "from", "to"])),
    fn("list_files", "List a folder.",
       obj({"path": {"type": "string"}, "recursive": {"type": "boolean"}, "pattern": {"type": "string", "nullable": True}})),
    fn("read_file", "Read a file.", obj({"path": {"type": "string"}}, ["path"])),
    fn("write_file", "Write a file.",
       obj({"path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": "string", "enum": ["w", "a"]}},
           ["path", "content"])),
    fn("run_sql", "Run a SQL query.",
       obj({"query": {"type": "string"}, "params": {"type": "array", "items": {"type": ["string", "number", "null"]}}},
           ["query"])),
    fn("get_stock", "Stock quote.", obj({"ticker": {"type": "string"}}, ["ticker"]),
       response={"type": "object", "description": "Quote with price and currency"}),
    fn("translate", "Translate text.",
       obj({"text": {"type": "string"}, "target": {"type": "string", "enum": ["fr", "de", "ja"]},
            "formality": {"type": "string", "enum": ["formal", "informal"], "nullable": True}},
           ["text", "target"])),
    fn("plot", "Draw a chart.",
       obj({"series": {"type": "array",
                       "items": {"type": "object",
                                 "properties": {"label": {"type": "string"},
                                                "points": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
                                 "required": ["label", "points"]}},
            "style": {"type": "object",
                      "properties": {"color": {"type": "string"}, "grid": {"type": "boolean"},
                                     "axis": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}}}}}},
           ["series"])),
    fn("no_params", "A tool without parameters."),
    fn("empty_params", "A tool with an empty parameter object.", obj({})),
    fn("update_profile", "Update the user profile.",
       obj({"user_id": {"type": "integer"},
            "fields": {"type": "object", "description": "Free-form fields",
                       "nickname": {"type": "string"}, "age": {"type": "integer"}},
            "tags": {"type": "array", "items": {"type": "string"}}},
           ["user_id"])),
    fn("book_flight", "Book a flight.",
       obj({"from": {"type": "string"}, "to": {"type": "string"}, "date": {"type": "string"},
            "passengers": {"type": "integer"}, "class": {"type": "string", "enum": ["economy", "business"]},
            "return": {"type": "STRING", "description": "Upper-case type, as some schemas write it"}},
           ["from", "to", "date"])),
    fn("calc", "Evaluate arithmetic.", obj({"expression": {"type": "string"}}, ["expression"])),
    fn("control_light", "Control a smart light.",
       obj({"room": {"type": "string"}, "on": {"type": "boolean"},
            "brightness": {"type": "number", "nullable": True},
            "color": {"type": "array", "items": {"type": "integer"}, "description": "RGB"}},
           ["room", "on"])),
]
assert len(TOOLS) == 20

EVERY_TYPE = {
    "text": "Paris, \"FR\" {braces} [brackets] a:b, c",
    "newlines": "line1\nline2\n\nend",
    "unicode": "naïve 日本語 🙂",
    "empty": "",
    "int": 42, "neg": -7, "zero": 0, "big": 9007199254740993,
    "float": 3.14, "tiny": 1e-7, "huge": 1e20, "round": 100.0, "exp": 1.5e10, "negf": -0.5,
    "yes": True, "no": False, "nothing": None,
    "list": [1, "two", 3.0, None, True, [], {}],
    "nested": {"Zeta": 1, "alpha": {"deep": [{"x": "y"}, [1, [2, [3]]]]}, "Beta": None},
    "empty_list": [], "empty_obj": {},
}


def call(cid, name, arguments):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def user(text):
    return {"role": "user", "content": text}


def assistant(content="", **extra):
    m = {"role": "assistant", "content": content}
    m.update(extra)
    return m


def tool(cid, content, **extra):
    m = {"role": "tool", "tool_call_id": cid, "content": content}
    m.update(extra)
    return m


def ctx(messages, add_generation_prompt=True, tools=None, **extra):
    c = {"messages": messages, "bos_token": "<bos>", "eos_token": "<eos>", "add_generation_prompt": add_generation_prompt}
    if tools is not None:
        c["tools"] = tools
    c.update(extra)
    return c


WEATHER = call("c1", "get_weather", {"city": "Paris", "unit": "celsius"})
TIME = call("c2", "get_time", {"city": "Tokyo"})
LOOP = [user("Weather in Paris and time in Tokyo?"),
        assistant("", tool_calls=[WEATHER, TIME], reasoning_content="Two tools at once."),
        tool("c1", "18 C, cloudy"), tool("c2", "09:30")]

CASES = [
    ("user_only", ctx([user("Hello!")])),
    ("user_only_no_prompt", ctx([user("Hello!")], add_generation_prompt=False)),
    ("system", ctx([{"role": "system", "content": "  You are terse.  "}, user("Hi")])),
    ("developer", ctx([{"role": "developer", "content": "Answer in French."}, user("Hi")])),
    ("developer_later", ctx([user("Hi"), {"role": "developer", "content": "Be brief."}, user("Again")])),
    ("system_parts", ctx([{"role": "system", "content": [{"type": "text", "text": " one "}, {"type": "text", "text": "two"}]},
                          user("Hi")])),
    ("thinking_on", ctx([user("Why is the sky blue?")], enable_thinking=True)),
    ("thinking_off_explicit", ctx([user("Why?")], enable_thinking=False)),
    ("bug_report_20_tools_thinking", ctx([{"role": "system", "content": "You are a helpful assistant."},
                                          user("What's the weather in Paris?")], tools=TOOLS, enable_thinking=True)),
    ("tools_no_system", ctx([user("Book me a flight")], tools=TOOLS)),
    ("tools_empty_conversation", ctx([], tools=TOOLS[:3])),
    ("every_argument_type", ctx([user("Do it"), assistant("", tool_calls=[call("a1", "update_profile", EVERY_TYPE)]),
                                 tool("a1", "ok"), assistant("Done.")], tools=TOOLS)),
    ("tool_result_object_raises", ctx([user("Stock?"), assistant("", tool_calls=[call("s1", "get_stock", {"ticker": "GOOG"})]),
                                tool("s1", {"price": 171.5, "currency": "USD", "history": [1, 2.5, None], "ok": True,
                                            "meta": {"Source": "x", "at": "now"}})], tools=TOOLS)),
    ("tool_result_parts", ctx([user("Look"), assistant("", tool_calls=[call("p1", "read_file", {"path": "a.png"})]),
                               tool("p1", [{"type": "text", "text": "Image of "}, {"type": "image"},
                                           {"type": "text", "text": "a cat"}, {"type": "input_audio"}, {"type": "video"}])],
                              tools=TOOLS)),
    # A mapping or a list of non-parts is a "sequence" to jinja2, iterated as content parts: raises.
    ("tool_result_list_raises", ctx([user("Calc"), assistant("", tool_calls=[call("n2", "calc", {"expression": "[1]"})]),
                                     tool("n2", [1, "a", None])], tools=TOOLS)),
    ("tool_result_scalars", ctx([user("Calc"), assistant("", tool_calls=[call("n1", "calc", {"expression": "6*7"}),
                                                                       call("n2", "calc", {"expression": "1/2"}),
                                                                       call("n3", "calc", {"expression": "1==1"}),
                                                                       call("n4", "calc", {"expression": "x"})]),
                                 tool("n1", 42), tool("n2", 0.5), tool("n3", True), tool("n4", None)], tools=TOOLS)),
    ("tool_result_json_text", ctx([user("Stock?"), assistant("", tool_calls=[call("s1", "get_stock", {"ticker": "X"})]),
                                   tool("s1", '{"price": 1.5}')], tools=TOOLS)),
    ("parallel_calls_loop_thinking", ctx(LOOP, tools=TOOLS, enable_thinking=True)),
    ("parallel_calls_loop_no_thinking", ctx(LOOP, tools=TOOLS)),
    ("parallel_results_out_of_order", ctx([user("Both"), assistant("", tool_calls=[WEATHER, TIME]),
                                           tool("c2", "09:30"), tool("c1", "18 C")], tools=TOOLS)),
    ("tool_name_fallbacks", ctx([user("x"), assistant("", tool_calls=[WEATHER, call("", "get_time", {"city": "Rome"})]),
                                 tool("zz", "named", name="get_time"), tool("zz", "unnamed")], tools=TOOLS)),
    ("reasoning_current_loop_kept", ctx(LOOP + [assistant("It is 18 C in Paris and 09:30 in Tokyo.",
                                                          reasoning_content="Combine both results.")],
                                        add_generation_prompt=False, tools=TOOLS, enable_thinking=True)),
    ("reasoning_earlier_turn_dropped", ctx(LOOP + [assistant("18 C and 09:30.", reasoning_content="old thought"),
                                                   user("Thanks! And tomorrow?")], tools=TOOLS, enable_thinking=True)),
    ("reasoning_key_reasoning", ctx([user("Hi"), assistant("", tool_calls=[WEATHER], reasoning="via reasoning key",
                                                           reasoning_content="shadowed"),
                                     tool("c1", "sunny")], tools=TOOLS, enable_thinking=True)),
    ("preserve_thinking", ctx([user("a"), assistant("", tool_calls=[WEATHER], reasoning_content="keep me"),
                               tool("c1", "sunny"), assistant("Sunny."), user("b")],
                              tools=TOOLS, enable_thinking=True, preserve_thinking=True)),
    ("thinking_in_content_stripped", ctx([user("Q1"), assistant("<|channel>thought\nhidden plan<channel|>Visible answer."),
                                          user("Q2")])),
    ("content_parts_with_thoughts", ctx([user("Q1"), assistant([{"type": "text", "text": "<|channel>x<channel|> A "},
                                                                {"type": "text", "text": " B"}]), user("Q2")])),
    ("multi_turn", ctx([{"role": "system", "content": "Sys"}, user("one"), assistant("uno"), user("two"),
                        assistant("dos"), user("three")])),
    ("multi_turn_no_prompt", ctx([user("one"), assistant("uno"), user("two"), assistant("dos")], add_generation_prompt=False)),
    ("call_without_result_at_end", ctx([user("Weather?"), assistant("", tool_calls=[WEATHER])], tools=TOOLS)),
    ("call_then_result_then_prompt_thinking", ctx([user("Weather?"), assistant("", tool_calls=[WEATHER]),
                                                   tool("c1", "sunny")], tools=TOOLS, enable_thinking=True)),
    ("call_then_result_no_prompt", ctx([user("Weather?"), assistant("", tool_calls=[WEATHER]), tool("c1", "sunny")],
                                       add_generation_prompt=False, tools=TOOLS)),
    ("content_and_call_then_result", ctx([user("Weather?"), assistant("Let me check.", tool_calls=[WEATHER]),
                                          tool("c1", "sunny")], tools=TOOLS)),
    ("content_and_call_then_result_thinking", ctx([user("Weather?"), assistant("Let me check.", tool_calls=[WEATHER]),
                                                   tool("c1", "sunny")], tools=TOOLS, enable_thinking=True)),
    ("consecutive_assistants", ctx([user("Hi"), assistant("Part one."), assistant("Part two."), user("ok")])),
    ("two_tool_loops_then_answer", ctx([user("Plan"), assistant("", tool_calls=[WEATHER]), tool("c1", "sunny"),
                                        assistant("", tool_calls=[TIME], reasoning_content="now time"), tool("c2", "09:30"),
                                        assistant("All set.")], add_generation_prompt=False, tools=TOOLS)),
    ("legacy_tool_responses", ctx([user("x"), assistant("Done.", tool_calls=[WEATHER],
                                                        tool_responses=[{"name": "get_weather", "response": {"temp": 18}},
                                                                        {"response": "no name"}])], tools=TOOLS)),
    ("arguments_none", ctx([user("x"), assistant("", tool_calls=[call("z", "no_params", None)]), tool("z", "ok")],
                           tools=TOOLS)),
    ("arguments_string_raises", ctx([user("x"), assistant("", tool_calls=[call("z", "calc", '{"expression": "1"}')])],
                                    tools=TOOLS)),
    ("user_media_parts", ctx([user([{"type": "image_url", "image_url": {"url": "a.png"}}, {"type": "text", "text": " Describe "},
                                    {"type": "audio"}, {"type": "video"}])])),
    ("orphan_tool_message", ctx([user("x"), tool("q", "orphan"), user("y")])),
    ("system_only", ctx([{"role": "system", "content": "Only system."}])),
    ("dictsort_case_insensitive_keys", ctx([user("x"), assistant("", tool_calls=[call("k", "update_profile",
                                                                                       {"b": 1, "A": 2, "a_": 3, "C": {"z": 1, "Y": 2}})])],
                                           tools=TOOLS)),
    ("whitespace_trimmed", ctx([user("  padded user  \n"), assistant("\n  padded model  \n"), user("x")])),
    ("thinking_on_multi_turn_tools", ctx([{"role": "system", "content": "Sys"}, user("first"),
                                          assistant("", tool_calls=[WEATHER], reasoning_content="t1"), tool("c1", "sunny"),
                                          assistant("Sunny.", reasoning_content="t2"), user("second"),
                                          assistant("", tool_calls=[TIME], reasoning_content="t3"), tool("c2", "09:30")],
                                         tools=TOOLS, enable_thinking=True)),
]
