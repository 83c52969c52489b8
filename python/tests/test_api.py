"""The Python binding: Cactus-compatible functions and the Model wrapper."""
import json
import threading

import pytest

import cactus
from cactus_test_paths import model_path
from conversation_data import make_conversation, make_tools


def test_complete_accepts_lists_and_json_strings(smollm):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    a = cactus.cactus_complete(smollm, messages, {"max_tokens": 16, "temperature": 0})
    cactus.cactus_reset(smollm)
    b = cactus.cactus_complete(smollm, json.dumps(messages), json.dumps({"max_tokens": 16, "temperature": 0}))
    assert a["success"] and b["success"]
    assert a["response"] == b["response"]
    assert "Paris" in a["response"]
    for key in ["success", "error", "cloud_handoff", "response", "thinking", "function_calls", "confidence",
                "time_to_first_token_ms", "total_time_ms", "prefill_tps", "decode_tps", "ram_usage_mb",
                "prefill_tokens", "decode_tokens", "total_tokens"]:
        assert key in a


def test_streaming_callback_pieces_join_to_response(smollm):
    pieces = []
    r = cactus.cactus_complete(smollm, [{"role": "user", "content": "Name a fruit."}], {"max_tokens": 12},
                               callback=lambda text, token_id: pieces.append(text))
    assert pieces and "".join(pieces).strip() == r["response"].strip()


def test_errors_raise_with_the_engine_message(smollm):
    with pytest.raises(cactus.CactusError, match="unknown key 'bogus'"):
        cactus.cactus_complete(smollm, [{"role": "user", "content": "hi"}], {"bogus": 1})
    with pytest.raises(cactus.CactusError, match="unknown role"):
        cactus.cactus_complete(smollm, [{"role": "robot", "content": "hi"}])
    with pytest.raises(cactus.CactusError, match="does not exist"):
        cactus.cactus_init("/no/such/file.gguf")
    assert cactus.cactus_complete(smollm, [{"role": "user", "content": "hi"}], {"max_tokens": 2})["success"]


@pytest.mark.parametrize("fixture", ["smollm", "gemma"])
def test_ignore_eos_with_tools_runs_to_max_tokens_and_a_forced_call_ends_the_reply(fixture, request):
    model = request.getfixturevalue(fixture)
    tools = make_tools(20, target_chars=4000)
    ask = [{"role": "user", "content": "Say hi in one word."}]
    for seed in (7, 8):
        cactus.cactus_reset(model)
        r = cactus.cactus_complete(model, ask, {"max_tokens": 40, "ignore_eos": True, "temperature": 0.7,
                                                "seed": seed, "enable_thinking_if_supported": True}, tools=tools)
        if r["function_calls"]:
            continue  # the model chose a call: its grammar may end the reply
        assert r["decode_tokens"] == 40 and r["finish_reason"] == "length", r
    cactus.cactus_reset(model)
    r = cactus.cactus_complete(model, ask, {"max_tokens": 300, "ignore_eos": True, "temperature": 0.7, "seed": 7,
                                            "force_tools": True, "parallel_tool_calls": False}, tools=tools)
    assert len(r["function_calls"]) == 1 and r["finish_reason"] == "stop" and r["decode_tokens"] < 300, r


def test_tokenize_and_render_prompt(smollm):
    ids = cactus.cactus_tokenize(smollm, "Hello world")
    assert len(ids) >= 2 and all(isinstance(i, int) for i in ids)
    text = cactus.cactus_render_prompt(smollm, [{"role": "user", "content": "Hi"}])
    assert text.endswith("<|im_start|>assistant\n")


def lcp(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_three_turn_chat_prefills_only_new_tokens(gemma):
    """Turns 2 and 3 re-send the whole conversation; only tokens after the cached prefix are computed."""
    cactus.cactus_reset(gemma)
    messages = []
    cached = []
    for turn, question in enumerate(["What is the capital of France?", "And of Germany?", "Which is larger?"]):
        messages.append({"role": "user", "content": question})
        prompt_ids = cactus.cactus_tokenize(gemma, cactus.cactus_render_prompt(gemma, messages))
        streamed_ids = []
        r = cactus.cactus_complete(gemma, messages, {"max_tokens": 24},
                                   callback=lambda text, token_id: streamed_ids.append(token_id))
        assert r["success"] and streamed_ids
        expected = len(prompt_ids) - lcp(prompt_ids, cached)
        assert r["prefill_tokens"] == expected
        if turn > 0:
            assert r["prefill_tokens"] < len(prompt_ids) // 2  # only the new turn is computed
        # The cache now holds the prompt and every generated token it fed back (all but the last
        # when generation ran out of tokens).
        generated = streamed_ids if r["finish_reason"] == "stop" else streamed_ids[:-1]
        cached = prompt_ids + generated
        messages.append({"role": "assistant", "content": r["response"]})


def test_model_chat_streams_pieces():
    with cactus.Model(model_path("smollm2-135m")) as model:
        pieces = list(model.chat([{"role": "user", "content": "Say hello."}], options={"max_tokens": 10}))
        assert pieces
        assert "".join(pieces).strip() == model.last_response["response"].strip()
        assert model.chat([{"role": "user", "content": "Say hello."}], stream=False, options={"max_tokens": 10})


def test_long_conversation_with_tools_from_a_python_thread(gemma):
    """The issue's scenario: a default-stack Python thread, two resets + completions at ~7,600 and
    ~11,400 rendered characters, 20 tools (~19,600 characters), thinking on, 1000 max tokens."""
    tools = make_tools(20, 19600)
    assert 18000 < len(json.dumps(tools)) < 21000
    results, errors = [], []

    def worker():
        try:
            for target in (7600, 11400):
                messages = make_conversation(target, render=lambda m: cactus.cactus_render_prompt(gemma, m))
                cactus.cactus_reset(gemma)
                pieces = []
                r = cactus.cactus_complete(gemma, messages,
                                           {"enable_thinking_if_supported": True, "max_tokens": 1000,
                                            "auto_handoff": False},
                                           tools=tools, callback=lambda t, i: pieces.append(t))
                results.append((target, r, pieces))
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors
    assert len(results) == 2
    for target, r, pieces in results:
        assert r["success"], r["error"]
        assert r["prefill_tokens"] > 0 and r["decode_tokens"] > 0
        json.dumps(r)
