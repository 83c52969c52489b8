"""llama-server's request extensions on /v1/chat/completions and /v1/completions: grammar (GBNF) and
json_schema constraining the real Qwen2.5 instruct model, logit_bias in both forms, n choices,
samplers order, assistant prefill / continue_final_message, chat_template_kwargs, reasoning_format,
llama-server's error shapes and the status of a whole answer that fails after its first token."""
import json
import os
import re

import pytest

from serverproc import MODELS, ServerProcess

QWEN = os.path.join(MODELS, "qwen2.5-coder-0.5b.gguf")
GRAMMARS = os.path.expanduser(
    "~/.cache/cactus/llama-cpp-sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/grammars")


@pytest.fixture(scope="module")
def qwen():
    if not os.path.isfile(QWEN):
        pytest.skip("missing " + QWEN)
    s = ServerProcess("--parallel", "3", "-t", "2", "--ctx-size", "3072", model=QWEN, alias="qwen")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def gemma4():
    """Gemma 4's chat template reads enable_thinking (the reduced model's weights are random)."""
    path = os.path.join(MODELS, "gemma4-reduced-q4_0.gguf")
    if not os.path.isfile(path):
        pytest.skip("missing " + path)
    s = ServerProcess("-t", "2", model=path, alias="gemma4")
    yield s
    assert s.stop() == 0


def chat(server, messages, **fields):
    body = {"messages": messages, "max_tokens": 24, "temperature": 0}
    body.update(fields)
    status, raw, _ = server.post("/v1/chat/completions", body)
    return status, json.loads(raw)


def complete(server, prompt, **fields):
    body = {"prompt": prompt, "max_tokens": 16, "temperature": 0}
    body.update(fields)
    status, raw, _ = server.post("/v1/completions", body)
    return status, json.loads(raw)


def ask(text):
    return [{"role": "user", "content": text}]


def content(reply):
    return reply["choices"][0]["message"]["content"]


def tokenize(server, text):
    return json.loads(server.post("/tokenize", {"content": text})[1])["tokens"]


# ---- grammar and json_schema (the done-when: they constrain the real model's output) ----

def test_gbnf_grammar_constrains_chat_and_completions(qwen):
    grammar = 'root ::= ("yes" | "no")'
    status, r = chat(qwen, ask("Is the sky green? Explain at length."), grammar=grammar)
    assert status == 200, r
    assert content(r) in ("yes", "no") and r["choices"][0]["finish_reason"] == "stop"
    status, r = complete(qwen, "Is water wet? Answer:", grammar=grammar, temperature=0.8, seed=3)
    assert status == 200 and r["choices"][0]["text"] in ("yes", "no"), r


def test_llama_cpp_sample_grammars_compile_and_constrain(qwen):
    # llama.cpp's own grammars/ (GBNF: character classes, \\x escapes, comments, repetition).
    with open(os.path.join(GRAMMARS, "list.gbnf")) as f:
        list_grammar = f.read()
    status, r = chat(qwen, ask("Name three fruits as a list."), grammar=list_grammar, max_tokens=40)
    assert status == 200, r
    text = content(r)
    lines = text.split("\n")
    assert all(re.fullmatch(r"- [^\r\n]+", line) for line in lines[:-1]) and text.startswith("- "), text
    for name in ("json.gbnf", "arithmetic.gbnf", "json_arr.gbnf"):
        with open(os.path.join(GRAMMARS, name)) as f:
            status, r = chat(qwen, ask("Give an example."), grammar=f.read(), max_tokens=8)
        assert status == 200, (name, r)
    with open(os.path.join(GRAMMARS, "json.gbnf")) as f:
        status, r = chat(qwen, ask("Describe a cat as a JSON object with a name."), grammar=f.read(), max_tokens=60)
    assert r["choices"][0]["finish_reason"] == "stop", r
    assert isinstance(json.loads(content(r)), dict)


def test_json_schema_top_level_and_in_json_object(qwen):
    import jsonschema
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
              "properties": {"name": {"type": "string", "maxLength": 16},
                             "age": {"type": "integer", "minimum": 0, "maximum": 150}}}
    for fields in ({"json_schema": schema},
                   {"response_format": {"type": "json_object", "schema": schema}}):
        status, r = chat(qwen, ask("Invent a person and give their name and age as JSON."), max_tokens=48, **fields)
        assert status == 200 and r["choices"][0]["finish_reason"] == "stop", r
        jsonschema.validate(json.loads(content(r)), schema)
    status, r = complete(qwen, "A person as JSON:", json_schema=schema, max_tokens=48)
    assert status == 200, r
    jsonschema.validate(json.loads(r["choices"][0]["text"]), schema)
    # An empty schema means any object (llama-server).
    status, r = chat(qwen, ask("Any JSON object."), json_schema={}, max_tokens=24)
    assert status == 200 and content(r).lstrip().startswith("{"), r


def test_invalid_grammar_and_conflicts_are_400s(qwen):
    status, r = chat(qwen, ask("hi"), grammar='root ::= ("a" ')
    assert status == 400 and r["error"]["param"] == "grammar" and "grammar" in r["error"]["message"], r
    status, r = chat(qwen, ask("hi"), grammar="root ::= undefined_rule")
    assert status == 400 and r["error"]["param"] == "grammar", r
    status, r = chat(qwen, ask("hi"), grammar='root ::= "a"', json_schema={"type": "object"})
    assert status == 400 and r["error"]["param"] == "grammar", r
    status, r = chat(qwen, ask("hi"), grammar='root ::= "a"', response_format={"type": "json_object"})
    assert status == 400, r
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    status, r = chat(qwen, ask("hi"), grammar='root ::= "a"', tools=tools)
    assert status == 400 and r["error"]["param"] == "grammar", r
    status, r = chat(qwen, ask("hi"), json_schema={"type": "object"}, tools=tools, tool_choice="required")
    assert status == 400 and r["error"]["param"] == "tool_choice", r
    status, r = chat(qwen, ask("hi"), json_schema="not a schema")
    assert status == 400 and r["error"]["param"] == "json_schema", r


# ---- logit_bias, samplers, n ----

def test_logit_bias_bans_and_boosts_in_both_forms(qwen):
    status, r = chat(qwen, ask("Say the word Paris three times."), max_tokens=12)
    free = content(r)
    assert "Paris" in free, free
    paris = tokenize(qwen, "Paris") + tokenize(qwen, " Paris")
    pieces = {t["piece"] for t in json.loads(qwen.post("/tokenize", {"content": "Paris Paris",
                                                                       "with_pieces": True})[1])["tokens"]}
    # llama-server's array form: a text bans all its tokens; OpenAI's map form by id.
    for bias in ([["Paris", False], [" Paris", False]], {str(t): -100 for t in paris}):
        status, r = chat(qwen, ask("Say the word Paris three times."), max_tokens=12, logit_bias=bias,
                         logprobs=True)
        assert status == 200, r
        drawn = [t["token"] for t in r["choices"][0]["logprobs"]["content"]]
        assert not pieces & set(drawn), (bias, drawn)
        assert content(r) != free
    boost = tokenize(qwen, " banana")
    assert len(boost) == 1
    status, r = chat(qwen, ask("Name a colour."), max_tokens=6, logit_bias=[[boost[0], 100]])
    assert status == 200 and "banana" in content(r), r
    status, r = complete(qwen, "The capital of France is", max_tokens=4, logit_bias={str(boost[0]): 100})
    assert status == 200 and "banana" in r["choices"][0]["text"], r
    for bad in ([[1, 500]], [[-5, 1]], {"-5": 1}, {"x": "y"}, "nope", [[1, True]], [[10 ** 9, 1]]):
        status, r = chat(qwen, ask("hi"), logit_bias=bad)
        assert status == 400 and r["error"]["param"] == "logit_bias", (bad, r)


def test_samplers_order_is_accepted_and_unknown_ones_refused(qwen):
    for order in (["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"],
                  ["temperature", "top-k", "nucleus"], "edkypmxt", []):
        status, r = chat(qwen, ask("Say hi."), max_tokens=4, temperature=0.7, seed=1, samplers=order)
        assert status == 200, (order, r)
    status, r = chat(qwen, ask("Say hi."), samplers=["top_k", "warp_drive"])
    assert status == 400 and r["error"]["param"] == "samplers", r
    status, r = chat(qwen, ask("Say hi."), samplers="kz")
    assert status == 400, r
    status, r = chat(qwen, ask("Say hi."), dry_multiplier=0.8)
    assert status == 400 and r["error"]["param"] == "dry_multiplier", r
    # Neutral values of samplers cactus lacks are fine (clients send all of them).
    status, r = chat(qwen, ask("Say hi."), max_tokens=2, dry_multiplier=0, typical_p=1, xtc_probability=0, mirostat=0)
    assert status == 200, r


def test_n_choices_whole_and_streamed(qwen):
    status, r = chat(qwen, ask("Write a short poem."), n=3, temperature=1.0, seed=11, max_tokens=12)
    assert status == 200, r
    assert [c["index"] for c in r["choices"]] == [0, 1, 2]
    texts = [c["message"]["content"] for c in r["choices"]]
    assert len(set(texts)) > 1, texts  # seeds 11, 12, 13
    assert r["usage"]["completion_tokens"] > 12
    status, raw, _ = qwen.post("/v1/completions", {"prompt": "Once upon a time", "n": 2, "max_tokens": 6,
                                                   "temperature": 0.9, "seed": 5, "stream": True,
                                                   "stream_options": {"include_usage": True}})
    assert status == 200
    events = [json.loads(line[6:]) for line in raw.decode().split("\n")
              if line.startswith("data: ") and line != "data: [DONE]"]
    assert raw.decode().count("data: [DONE]") == 1
    indices = {c["index"] for e in events for c in e.get("choices", [])}
    assert indices == {0, 1} and len({e["id"] for e in events}) == 1
    finishes = [c for e in events for c in e.get("choices", []) if c.get("finish_reason")]
    assert sorted(c["index"] for c in finishes) == [0, 1]
    usage = [e["usage"] for e in events if e.get("usage")]
    assert len(usage) == 1 and usage[0]["completion_tokens"] == 12
    assert "cached_tokens" in usage[0]["prompt_tokens_details"]
    status, r = chat(qwen, ask("hi"), n=9)
    assert status == 400 and r["error"]["param"] == "n", r


# ---- chat rendering: prefill, continue_final_message, chat_template_kwargs, reasoning_format ----

def test_assistant_prefill_continues_the_text(qwen, server):
    for srv in (qwen, server):
        messages = ask("List the first five prime numbers.") + [{"role": "assistant", "content": "2, 3, 5,"}]
        status, r = chat(srv, messages, max_tokens=6)
        assert status == 200, r
        assert re.match(r"\s*7", content(r)), content(r)
        status, r2 = chat(srv, messages, max_tokens=6, continue_final_message=True, add_generation_prompt=False)
        assert status == 200 and content(r2) == content(r), r2
    status, r = chat(qwen, ask("hi"), continue_final_message=True)
    assert status == 400 and r["error"]["param"] == "continue_final_message", r
    messages = ask("hi") + [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]
    status, r = chat(qwen, messages)
    assert status == 400, r


def test_chat_template_kwargs_reach_the_template(qwen, gemma4):
    counts = {}
    for thinking in (False, True):
        status, r = chat(gemma4, ask("hi"), max_tokens=1, chat_template_kwargs={"enable_thinking": thinking})
        assert status == 200, r
        counts[thinking] = r["usage"]["prompt_tokens"]
    assert counts[True] != counts[False], counts

    # Qwen2.5's template reads no kwargs but renders its default system prompt unless a system
    # message is given; a kwarg it does not read leaves the prompt alone, and a bad one is a 400.
    status, r = chat(qwen, ask("hi"), max_tokens=1)
    base = r["usage"]["prompt_tokens"]
    status, r = chat(qwen, ask("hi"), max_tokens=1, chat_template_kwargs={"unused_flag": True})
    assert status == 200 and r["usage"]["prompt_tokens"] == base
    status, r = chat(qwen, ask("hi"), chat_template_kwargs={"enable_thinking": "yes"})
    assert status == 400 and r["error"]["param"] == "chat_template_kwargs", r
    status, r = chat(qwen, ask("hi"), chat_template_kwargs=[1])
    assert status == 400, r


def test_reasoning_format_values(qwen):
    for fmt in ("none", "auto", "deepseek", "deepseek-legacy"):
        status, r = chat(qwen, ask("Say hi."), max_tokens=4, reasoning_format=fmt)
        assert status == 200, (fmt, r)
    # A grammar makes the model write a thinking block: auto moves it to reasoning_content, none
    # leaves the text as generated; streamed alike.
    think = {"grammar": 'root ::= "<think>hmm</think>yes"', "max_tokens": 20}
    status, r = chat(qwen, ask("hi"), reasoning_format="auto", **think)
    assert r["choices"][0]["message"]["reasoning_content"] == "hmm" and content(r) == "yes", r
    status, r = chat(qwen, ask("hi"), reasoning_format="none", **think)
    assert content(r) == "<think>hmm</think>yes" and "reasoning_content" not in r["choices"][0]["message"], r
    for fmt, want in (("auto", "yes"), ("none", "<think>hmm</think>yes")):
        status, raw, _ = qwen.post("/v1/chat/completions", dict(think, messages=ask("hi"), reasoning_format=fmt,
                                                                 stream=True))
        deltas = [c["delta"] for line in raw.decode().split("\n") if line.startswith("data: {")
                  for c in json.loads(line[6:])["choices"]]
        assert "".join(d.get("content") or "" for d in deltas) == want, (fmt, deltas)
    status, r = chat(qwen, ask("Say hi."), reasoning_format="verbose")
    assert status == 400 and r["error"]["param"] == "reasoning_format", r


# ---- errors and usage ----

def test_exceed_context_size_error_shape(qwen):
    status, r = chat(qwen, ask("word " * 1200))
    assert status == 400, r
    e = r["error"]
    assert e["type"] == "exceed_context_size_error" and e["code"] == 400
    assert e["n_prompt_tokens"] > e["n_ctx"] == 1024 and "message" in e
    status, r = complete(qwen, list(range(100, 1200)))
    assert status == 400 and r["error"]["type"] == "exceed_context_size_error", r


def test_whole_answer_failing_after_its_first_token_is_an_error_status(qwen):
    # The grammar "ab" needs "b" after "a"; banning every token that can write "b" leaves the
    # sampler nothing once "a" is out: the job fails after its first token.
    b_tokens = tokenize(qwen, "b")
    ab = tokenize(qwen, "ab")
    banned = [[t, False] for t in b_tokens] + ([[ab[0], False]] if len(ab) == 1 else [])
    status, r = chat(qwen, ask("Write ab."), grammar='root ::= "a" "b"', logit_bias=banned, max_tokens=4)
    assert status == 500 and r["error"]["type"] == "server_error" and "grammar" in r["error"]["message"], r
    status, raw, _ = qwen.post("/v1/chat/completions", {"messages": ask("Write ab."), "grammar": 'root ::= "a" "b"',
                                                        "logit_bias": banned, "max_tokens": 4, "stream": True})
    assert status == 200 and b'"error"' in raw


def test_defaults_are_llama_servers(qwen):
    # No sampling fields: llama-server's 0.8 / 40 / 0.95 / 0.05 and a random seed per request.
    replies = {content(chat(qwen, ask("Write a random word."), max_tokens=8, temperature=None)[1]) for _ in range(4)}
    assert len(replies) > 1, replies
    status, r = chat(qwen, ask("Count to ten."), max_tokens=8, seed=0, temperature=0.9)
    status, r2 = chat(qwen, ask("Count to ten."), max_tokens=8, seed=0, temperature=0.9)
    assert content(r) == content(r2)
    assert "cached_tokens" in r["usage"]["prompt_tokens_details"]
    status, r = complete(qwen, "Hello", max_tokens=2)
    assert "cached_tokens" in r["usage"]["prompt_tokens_details"]


def test_content_part_arrays_render_as_their_joined_text(qwen):
    # Qwen2.5's template concatenates the content as a string: an array of text parts (what many
    # OpenAI clients send) is joined into one string for it, so the prompt equals the string form.
    parts = [{"role": "user", "content": [{"type": "text", "text": "Say hi"}, {"type": "text", "text": " please."}]}]
    joined = ask("Say hi please.")
    prompts = [json.loads(qwen.post("/apply-template", {"messages": m})[1])["prompt"] for m in (parts, joined)]
    assert prompts[0] == prompts[1]
    status, reply = chat(qwen, parts, max_tokens=4)
    assert status == 200 and reply["usage"]["prompt_tokens"] == chat(qwen, joined, max_tokens=4)[1]["usage"]["prompt_tokens"]
    status, reply = chat(qwen, [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}])
    assert status == 400 and "input_audio" in reply["error"]["message"]
