"""Gemma 4's chat template (tests/chat/templates/gemma4_e2b.jinja) rendered by our engine vs jinja2
as transformers configures it, for the hand-built conversations of gemma4_cases.py (the random
conversations of test_template_oracle.py cover it too), and the engine's message preparation vs
transformers' for OpenAI-style messages (arguments as JSON text, reasoning under any of its names).
"""
import copy
import json

import pytest

from gemma4_cases import CASES, TOOLS
from test_template_oracle import TEMPLATES, jinja_render, run_probe, transformers_env

SOURCE = (TEMPLATES / "gemma4_e2b.jinja").read_text()


def test_hand_built_conversations_match_jinja2():
    env = transformers_env()
    got = run_probe([{"template": SOURCE, "context": c} for _, c in CASES])
    raised = 0
    for (name, context), have in zip(CASES, got):
        want = jinja_render(env, SOURCE, context)
        raised += not want["ok"]
        assert want["ok"] == have["ok"], (name, want, have)
        if want["ok"]:
            assert want["text"] == have["text"], (name, want["text"], have["text"])
    assert len(CASES) >= 30 and raised == sum(name.endswith("_raises") for name, _ in CASES)
    print(f"\ngemma4 template: {len(CASES)} hand-built conversations match jinja2 ({raised} raise in both)")


def test_rendered_shapes():
    """What the template must produce, checked on jinja2's own text so the cases test something."""
    env = transformers_env()
    text = {name: jinja_render(env, SOURCE, c) for name, c in CASES}
    bug = text["bug_report_20_tools_thinking"]["text"]
    assert bug.startswith("<bos><|turn>system\n<|think|>\nYou are a helpful assistant.<|tool>declaration:get_weather{")
    assert bug.count("<|tool>declaration:") == 20 and bug.endswith("<turn|>\n<|turn>user\nWhat's the weather in Paris?<turn|>\n<|turn>model\n")
    assert "<|channel>thought\n<channel|>" not in text["user_only"]["text"]  # E2B adds no empty thought block
    loop = text["parallel_calls_loop_thinking"]["text"]
    assert loop.endswith("<|tool_response>response:get_time{value:<|\"|>09:30<|\"|>}<tool_response|><|channel>thought\n")
    assert "<|channel>thought\nTwo tools at once.\n<channel|>" in loop
    assert "old thought" not in text["reasoning_earlier_turn_dropped"]["text"]
    assert "Combine both results." in text["reasoning_current_loop_kept"]["text"]
    assert text["call_without_result_at_end"]["text"].endswith("<tool_call|><|tool_response>")
    assert not text["arguments_string_raises"]["ok"]
    scalars = text["tool_result_scalars"]["text"]
    assert "response:calc{value:42}" in scalars and "response:calc{value:null}" in scalars
    legacy = text["legacy_tool_responses"]["text"]
    assert "<|tool_response>response:get_weather{temp:18}<tool_response|>" in legacy
    assert "<|tool_response>response:unknown{value:<|\"|>no name<|\"|>}<tool_response|>" in legacy


def openai_style(messages):
    """The same conversation as an OpenAI client sends it: arguments as JSON text, reasoning as
    `thinking` (the key our C API's responses use) or `reasoning`."""
    out = copy.deepcopy(messages)
    for k, m in enumerate(out):
        for c in m.get("tool_calls", []):
            if isinstance(c["function"]["arguments"], dict):
                c["function"]["arguments"] = json.dumps(c["function"]["arguments"], ensure_ascii=bool(k % 2))
        if "reasoning_content" in m and "reasoning" not in m:
            m[("thinking", "reasoning")[k % 2]] = m.pop("reasoning_content")
    return out


def transformers_prepared(messages):
    """transformers 5.x apply_chat_template: _alias_reasoning_fields; and arguments deserialized
    before the call, as the template's error message asks callers to do."""
    out = []
    for m in copy.deepcopy(messages):
        reasoning = next((m[k] for k in ("reasoning_content", "thinking", "reasoning") if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        for c in m.get("tool_calls", []):
            if isinstance(c["function"]["arguments"], str):
                c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        out.append(m)
    return out


def test_engine_preparation_matches_transformers():
    env = transformers_env()
    requests, expected, names = [], [], []
    for name, context in CASES:
        if name.endswith("_raises"):
            continue
        ours = dict(context, messages=openai_style(context["messages"]))
        reference = dict(context, messages=transformers_prepared(ours["messages"]))
        want = jinja_render(env, SOURCE, reference)
        if want["ok"] and context["add_generation_prompt"] and want["text"].endswith("<turn|>\n" + ("<|channel>thought\n" if context.get("enable_thinking") else "")):
            # finish_prompt: the template closed the model turn and opened none (llama.cpp's fix).
            want["text"] = want["text"].removesuffix("<|channel>thought\n") + "<|turn>model\n"
        requests.append({"template": SOURCE, "context": ours, "engine": True})
        expected.append(want)
        names.append(name)
    got = run_probe(requests)
    finished = 0
    for name, want, have in zip(names, expected, got):
        assert want["ok"] == have["ok"], (name, want, have)
        if want["ok"]:
            assert want["text"] == have["text"], (name, want["text"], have["text"])
            finished += want["text"].endswith("<turn|>\n<|turn>model\n") and "content_and_call" in name
    assert finished == 2  # both content + call + result cases got the model turn opened


def test_string_arguments_that_are_not_json_still_raise():
    context = dict(CASES[0][1], tools=TOOLS, messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "calc", "arguments": "not json"}}]}])
    have = run_probe([{"template": SOURCE, "context": context, "engine": True}])[0]
    assert not have["ok"] and "must be a JSON object" in have["error"]


def test_transformers_itself_agrees_when_installed():
    """Where transformers is importable (the torch venv), its own apply_chat_template renderer
    gives what transformers_prepared + jinja2 gives."""
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    env = transformers_env()
    for name, context in CASES:
        if name.endswith("_raises"):
            continue
        messages = openai_style(context["messages"])
        for m in messages:
            for c in m.get("tool_calls", []):
                c["function"]["arguments"] = json.loads(c["function"]["arguments"]) if isinstance(c["function"]["arguments"], str) else c["function"]["arguments"]
        extra = {k: v for k, v in context.items() if k not in ("messages", "tools", "add_generation_prompt")}
        rendered, _ = utils.render_jinja_template(conversations=[messages], tools=context.get("tools"), chat_template=SOURCE,
                                                  add_generation_prompt=context["add_generation_prompt"], **extra)
        want = jinja_render(env, SOURCE, dict(context, messages=transformers_prepared(messages)))
        assert want["ok"] and rendered[0] == want["text"], name
