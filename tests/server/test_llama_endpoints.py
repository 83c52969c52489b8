"""llama-server's own endpoints on `cactus serve`, with the request and response shapes of
llama-server's tools/server/README.md: /completion (prompt forms, streaming, n_probs, cache_prompt,
id_slot, return_tokens, timings_per_token, return_progress), /tokenize, /detokenize,
/apply-template, /props, /slots (and erase), /models, /v1/models, /infill and llama-server's
/metrics names. One server per module (smollm2-135m, two slots); /infill also runs on
qwen2.5-coder-0.5b, the one model here with FIM tokens."""
import json
import os
import threading
import time

import pytest

from serverproc import MODELS, ServerProcess

ALIASES = "smollm2-135m,smol"
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--parallel", "2", "-t", "2", "--quiet", alias=ALIASES)
    yield s
    assert s.stop() == 0


def post(server, path, body):
    status, raw, _ = server.post(path, body)
    return status, json.loads(raw) if raw.strip() else None


def complete(server, **fields):
    body = {"prompt": PROMPT, "n_predict": 6, "temperature": 0}
    body.update(fields)
    status, r = post(server, "/completion", body)
    assert status == 200, r
    return r


def sse_events(raw):
    """The JSON objects of an SSE body, and whether it ended with [DONE]."""
    events, done = [], False
    for line in raw.decode().splitlines():
        if line == "data: [DONE]":
            done = True
        elif line.startswith("data: "):
            events.append(json.loads(line[6:]))
    return events, done


def tokenize(server, text, **fields):
    return post(server, "/tokenize", {"content": text, **fields})[1]["tokens"]


FINAL_FIELDS = {"index", "content", "tokens", "id_slot", "stop", "model", "tokens_predicted", "tokens_evaluated",
                "generation_settings", "prompt", "has_new_line", "truncated", "stop_type", "stopping_word",
                "tokens_cached", "timings"}
TIMINGS = {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
           "predicted_ms", "predicted_per_token_ms", "predicted_per_second"}


def test_completion_whole_reply_has_llama_server_fields(server):
    r = complete(server)
    assert FINAL_FIELDS <= set(r) and TIMINGS <= set(r["timings"])
    assert r["stop"] is True and r["model"] == "smollm2-135m" and r["stop_type"] == "limit"
    assert r["tokens_predicted"] == 6 and r["tokens_evaluated"] == len(tokenize(server, PROMPT))
    assert r["tokens"] == [] and r["prompt"] == PROMPT and r["truncated"] is False
    assert r["timings"]["predicted_n"] == 6 and r["generation_settings"]["n_predict"] == 6
    assert "completion_probabilities" not in r
    with_ids = complete(server, return_tokens=True)
    assert len(with_ids["tokens"]) == 6 and with_ids["content"] == r["content"]
    # /completions is the same native route in llama-server (OpenAI's is /v1/completions)
    status, other = post(server, "/completions", {"prompt": PROMPT, "n_predict": 6, "temperature": 0})
    assert status == 200 and other["content"] == r["content"] and "choices" not in other


def test_prompt_as_ids_mixed_and_several(server):
    text = complete(server)
    ids = tokenize(server, PROMPT)
    assert complete(server, prompt=ids)["content"] == text["content"]
    head = tokenize(server, "The capital of")
    mixed = complete(server, prompt=head + [" France is"])  # strings are tokenized and joined
    assert mixed["tokens_evaluated"] == len(head) + len(tokenize(server, " France is"))
    status, both = post(server, "/completion", {"prompt": [PROMPT, "Hello"], "n_predict": 3, "temperature": 0})
    assert status == 200 and isinstance(both, list) and [b["index"] for b in both] == [0, 1]
    assert both[0]["content"] == text["content"][:len(both[0]["content"])]


def test_stop_word_sets_stop_type_and_stopping_word(server):
    r = complete(server, n_predict=20, stop=["."])
    assert r["stop_type"] == "word" and r["stopping_word"] == "." and "." not in r["content"]


def test_streamed_completion_is_native_sse(server):
    whole = complete(server)
    status, raw, headers = server.post("/completion", {"prompt": PROMPT, "n_predict": 6, "temperature": 0,
                                                       "stream": True, "timings_per_token": True})
    events, done = sse_events(raw)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert not done  # llama-server's native stream ends with the stop chunk, no [DONE]
    parts, last = events[:-1], events[-1]
    assert all(p["stop"] is False and {"content", "tokens", "id_slot", "index", "tokens_predicted",
                                       "tokens_evaluated", "timings"} <= set(p) for p in parts)
    assert "".join(p["content"] for p in parts) == whole["content"]
    assert sum(len(p["tokens"]) for p in parts) == 6
    assert last["stop"] is True and FINAL_FIELDS <= set(last) and last["content"] == ""
    assert last["generation_settings"]["stream"] is True


def test_return_progress_sends_prompt_progress(server):
    status, raw, _ = server.post("/completion", {"prompt": "word " * 40, "n_predict": 2, "stream": True,
                                                 "return_progress": True, "cache_prompt": False})
    events, _ = sse_events(raw)
    progress = [e["prompt_progress"] for e in events if "prompt_progress" in e]
    assert status == 200 and progress
    assert set(progress[-1]) == {"total", "cache", "processed", "time_ms"}
    assert progress[-1]["processed"] == progress[-1]["total"] == events[-1]["tokens_evaluated"]


def test_n_probs_shape(server):
    r = complete(server, n_probs=3, n_predict=4)
    probs = r["completion_probabilities"]
    assert len(probs) == 4
    for p in probs:
        assert set(p) == {"id", "token", "bytes", "logprob", "top_logprobs"} and p["logprob"] <= 0
        assert len(p["top_logprobs"]) == 3 and set(p["top_logprobs"][0]) == {"id", "token", "bytes", "logprob"}
        assert bytes(p["bytes"]).decode(errors="replace").startswith(p["token"])
        assert p["id"] == p["top_logprobs"][0]["id"]  # temperature 0: the most likely token
    post_probs = complete(server, n_probs=2, n_predict=2, post_sampling_probs=True)["completion_probabilities"]
    assert set(post_probs[0]) == {"id", "token", "bytes", "prob", "top_probs"}
    assert 0 <= post_probs[0]["prob"] <= 1 and 0 <= post_probs[0]["top_probs"][0]["prob"] <= 1
    status, raw, _ = server.post("/completion", {"prompt": PROMPT, "n_predict": 2, "n_probs": 2, "stream": True})
    events, _ = sse_events(raw)
    assert all(len(e["completion_probabilities"]) == 1 for e in events[:-1] if e["tokens"])


def test_id_slot_pins_and_cache_prompt_controls_reuse(server):
    prompt = "A long shared prefix about the history of Paris and its bridges. " * 4
    first = complete(server, prompt=prompt, id_slot=1)
    again = complete(server, prompt=prompt, id_slot=1)
    assert first["id_slot"] == again["id_slot"] == 1
    assert again["timings"]["cache_n"] > 0 and again["timings"]["prompt_n"] < first["timings"]["prompt_n"]
    fresh = complete(server, prompt=prompt, id_slot=1, cache_prompt=False)
    assert fresh["timings"]["cache_n"] == 0 and fresh["timings"]["prompt_n"] == fresh["tokens_evaluated"]
    assert fresh["content"] == first["content"]
    assert complete(server, id_slot=0)["id_slot"] == 0


def test_slots_and_erase(server):
    complete(server, id_slot=1)
    status, slots = server.get("/slots")[:2]
    slots = json.loads(slots)
    assert status == 200 and [s["id"] for s in slots] == [0, 1]
    s1 = slots[1]
    assert {"id", "n_ctx", "speculative", "is_processing", "id_task", "params", "next_token"} <= set(s1)
    assert s1["is_processing"] is False and s1["params"]["n_predict"] == 6
    assert s1["next_token"][0]["n_decoded"] == 6
    status, erased = post(server, "/slots/1?action=erase", {})
    assert status == 200 and erased["id_slot"] == 1 and erased["n_erased"] > 0
    assert post(server, "/slots/1?action=erase", {})[1]["n_erased"] == 0
    assert complete(server, id_slot=1)["timings"]["cache_n"] == 0
    status, err = post(server, "/slots/1?action=save", {"filename": "x.bin"})
    assert status == 501 and err["error"]["type"] == "not_supported_error"
    assert post(server, "/slots/7?action=erase", {})[0] == 400
    assert post(server, "/slots/1?action=nope", {})[0] == 400


def test_pinned_requests_wait_for_their_slot_and_erase_waits_for_a_busy_slot(server):
    replies = []
    threads = [threading.Thread(target=lambda: replies.append(complete(server, id_slot=1, n_predict=24)))
               for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    t0 = time.time()
    status, erased = post(server, "/slots/1?action=erase", {})  # answered once slot 1 is idle
    for t in threads:
        t.join(60)
    assert status == 200 and erased["n_erased"] > 0 and time.time() - t0 < 60
    assert [r["id_slot"] for r in replies] == [1, 1] and all(r["tokens_predicted"] == 24 for r in replies)


def test_logprobs_is_n_probs_when_an_integer(server):
    r = complete(server, logprobs=2, n_predict=2)
    assert len(r["completion_probabilities"]) == 2 and len(r["completion_probabilities"][0]["top_logprobs"]) == 2


def test_props_get_and_post(server):
    status, raw, _ = server.get("/props")
    props = json.loads(raw)
    assert status == 200 and props["total_slots"] == 2 and props["model_alias"] == "smollm2-135m"
    settings = props["default_generation_settings"]
    assert settings["n_ctx"] > 0 and {"temperature", "top_k", "top_p", "min_p", "n_predict", "seed"} <= set(
        settings["params"])
    assert props["modalities"] == {"vision": False, "video": False, "audio": False}
    assert props["chat_template"] and props["build_info"] and props["model_path"].endswith(".gguf")
    assert props["endpoint_slots"] is True and props["endpoint_props"] is False
    status, err = post(server, "/props", {"n_predict": 5})  # needs --props, as in llama-server
    assert status == 501 and err["error"]["type"] == "not_supported_error"


def test_tokenize_detokenize(server):
    ids = tokenize(server, "Hello world")
    pieces = tokenize(server, "Hello world", with_pieces=True)
    assert [p["id"] for p in pieces] == ids and "".join(p["piece"] for p in pieces) == "Hello world"
    # a piece that is part of a UTF-8 character comes as its bytes
    split = [p["piece"] for p in tokenize(server, "世界", with_pieces=True)]
    assert all(isinstance(p, (str, list)) for p in split) and any(isinstance(p, list) for p in split)
    assert tokenize(server, ["Hello", 42]) == tokenize(server, "Hello") + [42]
    assert tokenize(server, "<|im_start|>") != tokenize(server, "<|im_start|>", parse_special=False)
    assert post(server, "/tokenize", {})[1] == {"tokens": []}
    assert post(server, "/detokenize", {"tokens": ids})[1] == {"content": "Hello world"}
    status, err = post(server, "/detokenize", {"tokens": [-1]})
    assert status == 400 and err["error"]["param"] == "tokens"


def test_apply_template_is_what_chat_completions_runs(server):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
    status, r = post(server, "/apply-template", {"messages": messages})
    assert status == 200 and set(r) == {"prompt"} and "Name a colour." in r["prompt"]
    status, chat = post(server, "/v1/chat/completions", {"messages": messages, "max_tokens": 1})
    assert chat["usage"]["prompt_tokens"] == len(tokenize(server, r["prompt"], add_special=True))
    assert post(server, "/apply-template", {"messages": "hi"})[0] == 400


def test_models_and_aliases(server):
    for path in ("/models", "/v1/models"):
        status, raw, _ = server.get(path)
        listing = json.loads(raw)
        assert status == 200 and listing["object"] == "list"
        model = listing["data"][0]
        assert model["id"] == "smollm2-135m" and model["aliases"] == ["smollm2-135m", "smol"]
        assert {"n_vocab", "n_ctx_train", "n_embd", "size"} <= set(model["meta"])
        assert listing["models"][0]["name"] == "smollm2-135m"
    assert json.loads(server.get("/v1/models/smol")[1])["id"] == "smollm2-135m"
    assert server.get("/v1/models/nope")[0] == 404


def test_llama_server_metric_names(server):
    complete(server)
    text = server.get("/metrics")[1].decode()
    for name, kind in [("prompt_tokens_total", "counter"), ("prompt_seconds_total", "counter"),
                       ("tokens_predicted_total", "counter"), ("tokens_predicted_seconds_total", "counter"),
                       ("n_decode_total", "counter"), ("n_tokens_max", "counter"),
                       ("prompt_tokens_seconds", "gauge"), ("predicted_tokens_seconds", "gauge"),
                       ("requests_processing", "gauge"), ("requests_deferred", "gauge"),
                       ("n_busy_slots_per_decode", "gauge")]:
        assert "# TYPE llamacpp:%s %s" % (name, kind) in text
    values = {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l.startswith("llamacpp:")}
    assert values["llamacpp:tokens_predicted_total"] > 0 and values["llamacpp:n_decode_total"] > 0
    assert "cactus_completion_tokens_total" in text  # ours stay beside them


@pytest.mark.parametrize("body,param", [
    ({"n_predict": 3}, "prompt"),
    ({"prompt": 3}, "prompt"),
    ({"prompt": [PROMPT, 10 ** 9]}, "prompt"),
    ({"prompt": PROMPT, "n_probs": -1}, "n_probs"),
    ({"prompt": PROMPT, "id_slot": 2}, "id_slot"),
    ({"prompt": PROMPT, "response_fields": "content"}, "response_fields"),
    ({"prompt": [PROMPT, PROMPT], "stream": True}, "stream"),
])
def test_bad_completion_requests_are_400s(server, body, param):
    status, err = post(server, "/completion", body)
    assert status == 400 and err["error"]["param"] == param and err["error"]["message"]


def test_response_fields_pick_fields(server):
    r = complete(server, response_fields=["content", "generation_settings/n_predict", "nope"])
    assert set(r) == {"content", "generation_settings/n_predict"} and r["generation_settings/n_predict"] == 6


def test_infill_without_fim_tokens_is_501(server):
    status, err = post(server, "/infill", {"input_prefix": "def f(", "input_suffix": "):"})
    assert status == 501 and err["error"]["message"].startswith("Infill is not supported by this model")


CODER = os.path.join(MODELS, "qwen2.5-coder-0.5b.gguf")


@pytest.mark.skipif(not os.path.isfile(CODER), reason="qwen2.5-coder-0.5b.gguf not downloaded")
def test_infill_with_qwen_coder():
    s = ServerProcess("-t", "2", "--quiet", model=CODER, alias="coder")
    try:
        status, raw, _ = s.post("/infill", {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n",
                                            "input_extra": [{"filename": "util.py", "text": "# helpers\n"}],
                                            "n_predict": 6, "temperature": 0})
        r = json.loads(raw)
        assert status == 200 and r["tokens_predicted"] >= 1 and "a" in r["content"]
        assert "<|fim_prefix|>" in r["prompt"] and "<|fim_middle|>" in r["prompt"]
        status, raw, _ = s.post("/infill", {"input_prefix": "x"})
        assert status == 400 and json.loads(raw)["error"]["param"] == "input_suffix"
    finally:
        assert s.stop() == 0
