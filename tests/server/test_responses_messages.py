"""`cactus serve`'s OpenAI Responses API (/v1/responses, driven by the official openai client) and
Anthropic Messages API (/v1/messages, raw HTTP and the official anthropic client), both translated
into chat requests: a greedy reply equals the chat endpoint's for the same conversation, token
counts agree with the chat counter, streams follow each protocol's event order, tool calls forced
by tool_choice come back as function_call / tool_use, and errors have each protocol's shape.
One Qwen2.5 server (its chat template renders tools). Run:
    CACTUS_BUILD_DIR=build ~/.cache/cactus/oracle/venv/bin/python -m pytest -q tests/server/test_responses_messages.py
"""
import json
import os

import jsonschema
import openai
import pytest

from serverproc import MODELS, ServerProcess

QWEN = os.path.join(MODELS, "qwen2.5-coder-0.5b.gguf")
SYSTEM = "You are a helpful assistant."
QUESTION = "What is the capital city of France?"
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Get the current weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Get the current weather of a city",
                  "input_schema": WEATHER_TOOL["parameters"]}


@pytest.fixture(scope="module")
def qwen():
    if not os.path.isfile(QWEN):
        pytest.skip("missing %s (cactus pull qwen2.5-coder-0.5b)" % QWEN)
    s = ServerProcess("--parallel", "2", "-t", "2", model=QWEN, alias="qwen")
    yield s
    assert s.stop() == 0


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


def post_json(server, path, body):
    status, raw, _ = server.post(path, body)
    return status, json.loads(raw)


def sse_events(raw):
    """[(event line, data)] of a server-sent event stream; every event has both lines."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.strip().split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def chat_answer(server, messages, n):
    r = client(server).chat.completions.create(model="qwen", messages=messages, max_tokens=n, temperature=0)
    return r.choices[0].message.content


def chat_tokens(server, body):
    status, r = post_json(server, "/v1/chat/completions/input_tokens", body)
    assert status == 200 and r["object"] == "response.input_tokens"
    return r["input_tokens"]


# --- /v1/responses ------------------------------------------------------------------------------

def test_responses_text_equals_chat_and_counts_tokens(qwen):
    c = client(qwen)
    r = c.responses.create(model="qwen", instructions=SYSTEM, input=QUESTION, max_output_tokens=12, temperature=0,
                           metadata={"k": "v"}, store=False)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "qwen"
    assert r.status in ("completed", "incomplete")
    assert r.metadata == {"k": "v"}
    [message] = r.output
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "output_text" and message.content[0].annotations == []
    assert r.output_text == chat_answer(qwen, [{"role": "system", "content": SYSTEM},
                                              {"role": "user", "content": QUESTION}], 12)
    assert "Paris" in r.output_text
    u = r.usage
    assert 0 < u.output_tokens <= 12 and u.total_tokens == u.input_tokens + u.output_tokens
    assert u.output_tokens_details.reasoning_tokens == 0
    counted = c.responses.input_tokens.count(model="qwen", instructions=SYSTEM, input=QUESTION)
    assert counted.input_tokens == u.input_tokens
    assert counted.input_tokens == chat_tokens(qwen, {"messages": [{"role": "system", "content": SYSTEM},
                                                                   {"role": "user", "content": QUESTION}]})


def test_responses_cut_by_max_output_tokens_is_incomplete(qwen):
    r = client(qwen).responses.create(model="qwen", input="Write a long story about a cat.", max_output_tokens=3,
                                      temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3 and r.output_text


def test_responses_stream_events_and_text(qwen):
    c = client(qwen)
    whole = c.responses.create(model="qwen", input=QUESTION, max_output_tokens=10, temperature=0)
    events = list(c.responses.create(model="qwen", input=QUESTION, max_output_tokens=10, temperature=0,
                                     stream=True))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed" if whole.status == "completed" else "response.incomplete"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text == events[-1].response.output_text
    with c.responses.stream(model="qwen", input=QUESTION, max_output_tokens=30, temperature=0) as s:
        final = s.get_final_response()
    assert final.status == "completed" and "Paris" in final.output_text


def test_responses_forced_tool_call(qwen):
    c = client(qwen)
    r = c.responses.create(model="qwen", input="What is the weather in Paris?", tools=[WEATHER_TOOL],
                           tool_choice="required", max_output_tokens=60, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert r.status == "completed" and len(calls) == 1
    assert calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")
    assert json.loads(calls[0].arguments)["city"] == "Paris"
    # Streamed, with the function named: the arguments arrive as argument events.
    with c.responses.stream(model="qwen", input="What is the weather in Rome?", tools=[WEATHER_TOOL],
                            tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=60,
                            temperature=0) as s:
        types = [e.type for e in s]
        final = s.get_final_response()
    assert "response.function_call_arguments.delta" in types and "response.function_call_arguments.done" in types
    [call] = [o for o in final.output if o.type == "function_call"]
    assert json.loads(call.arguments)["city"] == "Rome"


def test_responses_function_call_output_round_trip(qwen):
    items = [{"role": "user", "content": "What is the weather in Paris?"},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 24 C"}]
    chat = [{"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 C"}]
    c = client(qwen)
    # The items render as the chat conversation does: same prompt, same token count.
    counted = c.responses.input_tokens.count(model="qwen", input=items, tools=[WEATHER_TOOL])
    assert counted.input_tokens == chat_tokens(qwen, {"messages": chat, "tools": [
        {"type": "function", "function": {k: v for k, v in WEATHER_TOOL.items() if k != "type"}}]})
    r = c.responses.create(model="qwen", input=items, max_output_tokens=24, temperature=0)
    assert r.output_text == chat_answer(qwen, chat, 24)
    assert "sunny" in r.output_text.lower() or "24" in r.output_text


def test_responses_json_schema_format(qwen):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    r = client(qwen).responses.create(
        model="qwen", input="Invent a person.", max_output_tokens=60, temperature=0,
        text={"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(r.output_text), schema)


def test_responses_errors_name_the_field(qwen):
    c = client(qwen)
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model="qwen", input="hi", previous_response_id="resp_123")
    assert e.value.body["param"] == "previous_response_id"
    for body, param in [({"model": "qwen"}, "input"),
                        ({"input": [{"type": "mystery"}]}, "input"),
                        ({"input": 5}, "input"),
                        ({"input": "hi", "text": {"format": {"type": "xml"}}}, "text.format"),
                        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
                        ({"input": "hi", "tool_choice": {"type": "function", "name": "nope"},
                          "tools": [WEATHER_TOOL]}, "tool_choice")]:
        status, r = post_json(qwen, "/v1/responses", body)
        assert status == 400 and r["error"]["param"] == param, (body, r)


# --- /v1/messages -------------------------------------------------------------------------------

def messages_body(**extra):
    body = {"model": "claude", "max_tokens": 12, "system": SYSTEM, "temperature": 0,
            "messages": [{"role": "user", "content": QUESTION}]}
    body.update(extra)
    return body


def test_messages_text_equals_chat(qwen):
    status, r = post_json(qwen, "/v1/messages", messages_body())
    assert status == 200
    assert r["id"].startswith("msg_") and r["type"] == "message" and r["role"] == "assistant"
    assert r["model"] == "claude" and r["stop_reason"] in ("end_turn", "max_tokens") and r["stop_sequence"] is None
    [block] = r["content"]
    assert block["type"] == "text"
    assert block["text"] == chat_answer(qwen, [{"role": "system", "content": SYSTEM},
                                              {"role": "user", "content": QUESTION}], 12)
    u = r["usage"]
    assert 0 < u["output_tokens"] <= 12
    assert u["input_tokens"] + u["cache_read_input_tokens"] == chat_tokens(
        qwen, {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]})
    # System as text blocks and content as text blocks render the same conversation.
    status, counted = post_json(qwen, "/v1/messages/count_tokens", {
        "system": [{"type": "text", "text": SYSTEM}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]})
    assert status == 200 and counted == {"input_tokens": u["input_tokens"] + u["cache_read_input_tokens"]}


def test_messages_stop_reasons(qwen):
    counting = [{"role": "user", "content": "Write the numbers from 1 to 10 separated by commas."}]
    status, r = post_json(qwen, "/v1/messages", messages_body(messages=counting, max_tokens=30,
                                                              stop_sequences=["5"]))
    assert status == 200 and r["stop_reason"] == "stop_sequence" and r["stop_sequence"] == "5"
    assert "5" not in r["content"][0]["text"] and "4" in r["content"][0]["text"]
    status, r = post_json(qwen, "/v1/messages", messages_body(messages=counting, max_tokens=2))
    assert r["stop_reason"] == "max_tokens" and r["usage"]["output_tokens"] == 2


def test_messages_stream_event_order(qwen):
    _, whole = post_json(qwen, "/v1/messages", messages_body())
    status, raw, headers = qwen.post("/v1/messages", messages_body(stream=True))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_") and start["content"] == [] and start["stop_reason"] is None
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == whole["content"][0]["text"]
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == whole["stop_reason"]
    assert delta["usage"]["output_tokens"] == whole["usage"]["output_tokens"]


def test_messages_forced_tool_use(qwen):
    body = messages_body(messages=[{"role": "user", "content": "What is the weather in Paris?"}], max_tokens=60,
                         tools=[ANTHROPIC_TOOL], tool_choice={"type": "tool", "name": "get_weather"})
    status, r = post_json(qwen, "/v1/messages", body)
    assert status == 200 and r["stop_reason"] == "tool_use"
    [use] = [b for b in r["content"] if b["type"] == "tool_use"]
    assert use["name"] == "get_weather" and use["id"].startswith("toolu_") and use["input"]["city"] == "Paris"
    # Streamed: the input arrives as input_json_delta.
    status, raw, _ = qwen.post("/v1/messages", dict(body, stream=True, tool_choice={"type": "any"}))
    events = sse_events(raw)
    [start] = [d for n, d in events if n == "content_block_start"]
    assert start["content_block"]["type"] == "tool_use" and start["content_block"]["input"] == {}
    partial = "".join(d["delta"]["partial_json"] for n, d in events
                      if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
    assert json.loads(partial)["city"] == "Paris"
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_messages_tool_result_round_trip(qwen):
    messages = [{"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny, 24 C"}]}]}]
    chat = [{"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "toolu_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny, 24 C"}]
    status, counted = post_json(qwen, "/v1/messages/count_tokens", {"messages": messages})
    assert status == 200 and counted["input_tokens"] == chat_tokens(qwen, {"messages": chat})
    status, r = post_json(qwen, "/v1/messages", messages_body(system=None, messages=messages, max_tokens=24))
    assert status == 200 and r["content"][0]["text"] == chat_answer(qwen, chat, 24)


def test_messages_errors_have_anthropics_shape(qwen):
    for body in [{"max_tokens": 5},
                 {"messages": [{"role": "system", "content": "x"}]},
                 {"messages": [{"role": "user", "content": [{"type": "document"}]}]},
                 {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0},
                 {"messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "maybe"}}]:
        status, r = post_json(qwen, "/v1/messages", body)
        assert status == 400 and r["type"] == "error", (body, r)
        assert r["error"]["type"] == "invalid_request_error" and r["error"]["message"], r
    status, raw, _ = qwen.post("/v1/messages", b"{not json")
    assert status == 400 and json.loads(raw)["error"]["type"] == "invalid_request_error"


def test_messages_auth_and_unknown_routes_in_anthropics_shape():
    s = ServerProcess("--api-key", "sekret", "-t", "2")
    try:
        body = {"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
        status, raw, _ = s.post("/v1/messages", body)
        assert status == 401 and json.loads(raw)["error"]["type"] == "authentication_error", raw
        status, raw, _ = s.post("/v1/messages", body, headers={"x-api-key": "sekret", "anthropic-version": "2023-06-01"})
        assert status == 200 and json.loads(raw)["usage"]["output_tokens"] <= 2, raw
        status, raw, _ = s.post("/v1/messages/nope", body, headers={"x-api-key": "sekret"})
        assert status == 404 and json.loads(raw)["error"]["type"] == "not_found_error", raw
        status, raw, _ = s.post("/v1/responses", {"input": "hi"})
        assert status == 401 and json.loads(raw)["error"]["code"] == "invalid_api_key", raw
        status, raw, _ = s.post("/v1/responses", {"input": "hi", "max_output_tokens": 2},
                                headers={"Authorization": "Bearer sekret"})
        assert status == 200 and json.loads(raw)["object"] == "response", raw
    finally:
        assert s.stop() == 0


def test_anthropic_client(qwen):
    anthropic = pytest.importorskip("anthropic")
    c = anthropic.Anthropic(base_url=qwen.url, api_key="none", max_retries=0, timeout=120)
    greedy = {"temperature": 0}  # this client version leaves temperature out of its signature
    m = c.messages.create(model="claude", max_tokens=12, system=SYSTEM, extra_body=greedy,
                          messages=[{"role": "user", "content": QUESTION}])
    assert m.content[0].type == "text" and "Paris" in m.content[0].text
    with c.messages.stream(model="claude", max_tokens=12, system=SYSTEM, extra_body=greedy,
                           messages=[{"role": "user", "content": QUESTION}]) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == m.content[0].text == final.content[0].text
    assert final.stop_reason == m.stop_reason
    assert c.messages.count_tokens(model="claude", system=SYSTEM,
                                   messages=[{"role": "user", "content": QUESTION}]).input_tokens > 5
    with pytest.raises(anthropic.BadRequestError) as e:
        c.messages.create(model="claude", max_tokens=5, messages=[{"role": "robot", "content": "hi"}])
    assert e.value.body["error"]["type"] == "invalid_request_error"
