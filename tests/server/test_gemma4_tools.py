"""`cactus serve` on Gemma 4 (the reduced random-weight file; CACTUS_GEMMA4_MODEL names another):
OpenAI chat completions with tools and tool_choice "required" (the server's force_tools) over ten of
python/tests/tool_requests.py's requests (one per tool set, 1 to 20 tools), through the official
openai client: every reply holds at least one call, of an offered tool, whose arguments (a JSON
string) validate with jsonschema (100%, asserted), and a reply that ended holds no Gemma marker in
its content; one more request streamed, its call deltas assembled and checked the same way. The
tools are bounded as python/tests/gemma4_session.bounded_for_random_weights explains."""
import json
import os
import sys

import openai
import pytest

from serverproc import MODELS, REPO, ServerProcess

sys.path.insert(0, os.path.join(REPO, "python", "tests"))
import gemma4_session as gs  # noqa: E402
from tool_requests import tool_requests  # noqa: E402

jsonschema = pytest.importorskip("jsonschema")

MODEL = os.environ.get("CACTUS_GEMMA4_MODEL") or os.path.join(MODELS, "gemma4-reduced-q4_0.gguf")
ALIAS = "gemma4"
MAX_TOKENS = 256


@pytest.fixture(scope="module")
def gemma4_server():
    s = ServerProcess("--parallel", "1", "-t", "2", model=MODEL, alias=ALIAS)
    yield s
    assert s.stop() == 0


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=300)


def call_problems(calls, tools, content, finish, cut):
    """What is wrong with one reply's calls ({name, arguments} with arguments a JSON string). cut: the
    reply used all of max_tokens (the server reports such a reply with calls as "tool_calls")."""
    problems = []
    if not calls:
        problems.append("no call (finish %s): %r" % (finish, content))
    for call in calls:
        try:
            call["arguments"] = json.loads(call["arguments"])
        except ValueError as e:
            problems.append("%s: arguments are not JSON (%s): %r" % (call["name"], e, call["arguments"]))
    reply = {"function_calls": [c for c in calls if isinstance(c["arguments"], dict)], "response": content or ""}
    problems += gs.call_errors(reply, tools, jsonschema.Draft202012Validator)
    if finish not in ("tool_calls", "length"):
        problems.append("finish_reason %r for a forced reply" % finish)
    if not cut:
        problems += gs.marker_errors(reply)
    return problems


def one_per_tool_set():
    """The first request of each of tool_requests' ten tool sets, tools bounded."""
    return [(gs.bounded_for_random_weights(tools), messages) for tools, messages, _ in tool_requests()[::5]]


def test_tool_choice_required_always_gives_valid_calls(gemma4_server):
    c = client(gemma4_server)
    requests = one_per_tool_set()
    assert len(requests) == 10 and max(len(t) for t, _ in requests) == 20
    valid, cut, problems = 0, 0, []
    for i, (tools, messages) in enumerate(requests):
        r = c.chat.completions.create(model=ALIAS, messages=messages, tools=tools, tool_choice="required",
                                      max_tokens=MAX_TOKENS, temperature=0.8, seed=i + 1)
        choice = r.choices[0]
        calls = [{"name": t.function.name, "arguments": t.function.arguments} for t in choice.message.tool_calls or []]
        was_cut = r.usage.completion_tokens >= MAX_TOKENS
        errors = call_problems(calls, tools, choice.message.content, choice.finish_reason, was_cut)
        cut += was_cut
        valid += not errors
        problems += ["request %d: %s" % (i, e) for e in errors]
    print("\nGemma 4 tool_choice required (cactus serve): %d/%d replies hold only valid calls (%.0f%%); %d cut at "
          "max_tokens" % (valid, len(requests), 100.0 * valid / len(requests), cut))
    assert not problems, "\n".join(problems)


def test_streamed_required_call_assembles_and_validates(gemma4_server):
    tools, messages = one_per_tool_set()[7]  # 20 tools
    stream = client(gemma4_server).chat.completions.create(
        model=ALIAS, messages=messages, tools=tools, tool_choice="required", max_tokens=MAX_TOKENS, temperature=0.8,
        seed=3, stream=True, stream_options={"include_usage": True})
    calls, content, finish, used = {}, "", None, 0
    for chunk in stream:
        if chunk.usage:
            used = chunk.usage.completion_tokens
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        for d in choice.delta.tool_calls or []:
            call = calls.setdefault(d.index, {"name": "", "arguments": ""})
            call["name"] += (d.function.name or "") if d.function else ""
            call["arguments"] += (d.function.arguments or "") if d.function else ""
        finish = choice.finish_reason or finish
    assembled = [calls[i] for i in sorted(calls)]
    problems = call_problems(assembled, tools, content, finish, used >= MAX_TOKENS)
    print("\nstreamed: %d calls, finish %s" % (len(assembled), finish))
    assert not problems, "\n".join(problems)
