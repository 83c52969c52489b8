"""`cactus serve` driven by the official ollama Python client: /api/chat and /api/generate
(streamed NDJSON and whole), /api/tags, /api/show, /api/pull, /api/version and GET /."""
import json

import ollama
import pytest

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
ASK = {"role": "user", "content": "What is the capital city of France?"}
GREEDY = {"temperature": 0, "num_predict": 12}


def client(server):
    return ollama.Client(host=server.url, timeout=120)


def test_chat_whole_and_streamed_agree(server):
    c = client(server)
    whole = c.chat(model="smollm2-135m", messages=[SYSTEM, ASK], options=GREEDY, stream=False)
    assert whole.done and whole.message.role == "assistant" and "Paris" in whole.message.content
    assert whole.eval_count <= 12 and whole.prompt_eval_count > 5
    parts = list(c.chat(model="smollm2-135m", messages=[SYSTEM, ASK], options=GREEDY, stream=True))
    assert parts[-1].done and parts[-1].done_reason in ("stop", "length")
    assert all(not p.done for p in parts[:-1])
    assert "".join(p.message.content for p in parts) == whole.message.content


def test_generate_whole_and_streamed(server):
    c = client(server)
    whole = c.generate(model="smollm2-135m", prompt="The capital of France is", raw=True, options=GREEDY)
    assert whole.done and "Paris" in whole.response
    streamed = "".join(p.response for p in c.generate(model="smollm2-135m", prompt="The capital of France is",
                                                       raw=True, options=GREEDY, stream=True))
    assert streamed == whole.response
    templated = c.generate(model="smollm2-135m", prompt="Say hi", system="Be brief.", options=GREEDY)
    assert templated.response


def test_list_show_version_and_root(server):
    c = client(server)
    models = c.list().models
    assert [m.model for m in models] == ["smollm2-135m"] and models[0].size > 50_000_000
    shown = c.show("smollm2-135m")
    assert shown.details.family == "llama" and shown.template
    status, body, _ = server.get("/api/version")
    assert status == 200 and json.loads(body)["version"]
    assert server.get("/")[1] == b"Ollama is running"


def test_pull_streams_progress_and_unknown_models_fail(server):
    c = client(server)
    events = list(c.pull("smollm2-135m", stream=True))  # present already: verified, then success
    assert events[0].status == "pulling manifest" and events[-1].status == "success"
    assert c.pull("smollm2-135m").status == "success"
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("no-such-model")
    assert e.value.status_code == 404 and "unknown model" in e.value.error


def test_bad_options_are_400(server):
    with pytest.raises(ollama.ResponseError) as e:
        client(server).chat(model="smollm2-135m", messages=[ASK], options={"temperature": "hot"})
    assert e.value.status_code == 400 and "temperature" in e.value.error


CITY = {"type": "object", "additionalProperties": False, "required": ["city", "population"],
        "properties": {"city": {"type": "string", "maxLength": 12},
                       "population": {"type": "integer", "minimum": 0, "maximum": 99999999}}}


def test_format_json_and_schema(server):
    import jsonschema
    c = client(server)
    ask = {"role": "user", "content": "Give the capital of France and its population as JSON."}
    opts = {"temperature": 0, "num_predict": 64}
    short = {"role": "user", "content": "Reply with a JSON object with one key, city, for the capital of France."}
    r = c.chat(model="smollm2-135m", messages=[short], options={"temperature": 0, "num_predict": 160}, format="json",
               stream=False)
    assert r.done_reason == "stop", r.message.content
    assert isinstance(json.loads(r.message.content), dict)
    r = c.chat(model="smollm2-135m", messages=[ask], options=opts, format=CITY, stream=False)
    jsonschema.validate(json.loads(r.message.content), CITY)
    streamed = "".join(p.message.content for p in c.chat(model="smollm2-135m", messages=[ask], options=opts,
                                                         format=CITY, stream=True))
    jsonschema.validate(json.loads(streamed), CITY)
    g = c.generate(model="smollm2-135m", prompt="The capital of France as JSON:", options=opts, format=CITY)
    jsonschema.validate(json.loads(g.response), CITY)
    status, body = server.post("/api/chat", {"model": "smollm2-135m", "messages": [ask], "format": "yaml"})[:2]
    assert status == 400 and "format" in json.loads(body)["error"]  # (the client refuses it before sending)
    bad = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "required": ["a"]}
    with pytest.raises(ollama.ResponseError) as e:
        c.chat(model="smollm2-135m", messages=[ask], options=opts, format=bad)
    assert e.value.status_code == 400 and "format" in e.value.error
