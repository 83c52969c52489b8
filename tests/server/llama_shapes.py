"""The drop-in check of `cactus serve` against llama-server: one command line and environment as
llama-server is usually started, one list of requests in llama-server's shapes, and the shape of
each answer (keys and value kinds, not values: the two engines sample differently).
scripts/record_llama_server_shapes.py runs the list against the real llama-server (built from the
llama-cpp-python sdist of our oracles) and commits the shapes to data/llama_server_shapes.json;
test_llama_dropin.py runs it against cactus serve and compares."""
import json
import urllib.error
import urllib.request

# llama-server's usual start: flags on the command line, more in LLAMA_ARG_* variables.
FLAGS = ["--temp", "0.8", "--seed", "42", "-n", "64", "-b", "32", "-ub", "32", "--no-ui", "--jinja",
         "-fa", "on", "-ctk", "f16", "-ctv", "f16", "--metrics", "--slots", "--props", "-t", "2",
         "--threads-http", "8", "--timeout", "120", "--alias", "smollm2"]
ENV = {"LLAMA_ARG_CTX_SIZE": "4096", "LLAMA_ARG_N_PARALLEL": "2", "LLAMA_ARG_NO_WEBUI": "1"}

MESSAGES = [{"role": "system", "content": "You answer in one word."},
            {"role": "user", "content": "What is the capital of France?"}]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

# (name, method, path, body, kind): kind "json" (one JSON body), "sse" (an event stream), "metrics"
# (Prometheus text: the metric names). Bodies are bytes when deliberately malformed.
REQUESTS = [
    ("health", "GET", "/health", None, "json"),
    ("props", "GET", "/props", None, "json"),
    ("models", "GET", "/models", None, "json"),
    ("v1_models", "GET", "/v1/models", None, "json"),
    ("slots", "GET", "/slots", None, "json"),
    ("metrics", "GET", "/metrics", None, "metrics"),
    ("tokenize", "POST", "/tokenize", {"content": "Hello world"}, "json"),
    ("tokenize_pieces", "POST", "/tokenize", {"content": "Hello world", "with_pieces": True}, "json"),
    ("detokenize", "POST", "/detokenize", {"tokens": [19556, 905]}, "json"),
    ("apply_template", "POST", "/apply-template", {"messages": MESSAGES}, "json"),
    ("completion", "POST", "/completion",
     {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0}, "json"),
    ("completion_probs", "POST", "/completion",
     {"prompt": "The capital of France is", "n_predict": 4, "n_probs": 3, "temperature": 0}, "json"),
    ("completion_mixed", "POST", "/completion",
     {"prompt": [504, 3575, " of France is"], "n_predict": 4, "temperature": 0, "return_tokens": True}, "json"),
    ("completion_stream", "POST", "/completion",
     {"prompt": "The capital of France is", "n_predict": 6, "temperature": 0, "stream": True,
      "timings_per_token": True, "return_tokens": True}, "sse"),
    ("completion_progress", "POST", "/completion",
     {"prompt": "The capital of France is", "n_predict": 2, "stream": True, "return_progress": True,
      "cache_prompt": False}, "sse"),
    ("completion_slot", "POST", "/completion",
     {"prompt": "Paris is", "n_predict": 4, "id_slot": 1, "cache_prompt": True}, "json"),
    ("completion_grammar", "POST", "/completion",
     {"prompt": "Is the sky blue? Answer:", "n_predict": 8, "grammar": 'root ::= " yes" | " no"'}, "json"),
    ("completion_json_schema", "POST", "/completion",
     {"prompt": "A person as JSON:", "n_predict": 48,
      "json_schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}, "json"),
    ("completion_bad_grammar", "POST", "/completion",
     {"prompt": "x", "n_predict": 2, "grammar": "root ::= (("}, "json"),
    ("completion_too_long", "POST", "/completion",
     {"prompt": "hello " * 3000, "n_predict": 2}, "json"),
    ("completion_bad_json", "POST", "/completion", b"{not json", "json"),
    ("slots_erase", "POST", "/slots/1?action=erase", {}, "json"),
    ("chat", "POST", "/v1/chat/completions",
     {"messages": MESSAGES, "max_tokens": 8, "temperature": 0}, "json"),
    ("chat_stream", "POST", "/v1/chat/completions",
     {"messages": MESSAGES, "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True}}, "sse"),
    ("chat_json_schema", "POST", "/v1/chat/completions",
     {"messages": MESSAGES, "max_tokens": 32,
      "json_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}, "json"),
    ("chat_n", "POST", "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 4, "n": 2}, "json"),
    ("chat_logit_bias", "POST", "/v1/chat/completions",
     {"messages": MESSAGES, "max_tokens": 4, "logit_bias": [[504, False]]}, "json"),
    ("chat_too_long", "POST", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "hello " * 3000}], "max_tokens": 2}, "json"),
    ("chat_tools", "POST", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL],
      "tool_choice": "required", "max_tokens": 48, "temperature": 0}, "json"),
    ("v1_completions", "POST", "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 4}, "json"),
    ("responses", "POST", "/v1/responses", {"input": "Say hi.", "max_output_tokens": 8}, "json"),
    ("responses_stream", "POST", "/v1/responses", {"input": "Say hi.", "max_output_tokens": 6, "stream": True}, "sse"),
    ("messages", "POST", "/v1/messages",
     {"model": "smollm2", "max_tokens": 8, "messages": [{"role": "user", "content": "Say hi."}]}, "json"),
    ("messages_stream", "POST", "/v1/messages",
     {"model": "smollm2", "max_tokens": 6, "stream": True, "messages": [{"role": "user", "content": "Say hi."}]},
     "sse"),
    ("messages_count", "POST", "/v1/messages/count_tokens",
     {"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}]}, "json"),
    ("unknown_route", "GET", "/no/such/route", None, "json"),
]


def kind_of(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    return None


def shape(v):
    """Keys and value kinds: objects map keys to shapes; an array is the merged shape of its items."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        merged = None
        for x in v:
            merged = merge(merged, shape(x))
        return [merged] if merged is not None else []
    return kind_of(v)


def merge(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out.get(k), v)
        return out
    if isinstance(a, list) and isinstance(b, list):
        items = [x for x in a + b if x is not None]
        m = None
        for x in items:
            m = merge(m, x)
        return [m] if m is not None else []
    if a == "null":
        return b
    return a


def sse_events(raw):
    """(event name or "data", parsed JSON or "[DONE]") for each event of a stream."""
    out = []
    for block in raw.decode("utf-8", "replace").split("\n\n"):
        name, data = "data", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if not data:
            continue
        text = "\n".join(data)
        out.append((name, "[DONE]" if text == "[DONE]" else json.loads(text)))
    return out


def stream_shape(raw):
    """A stream's shape: the merged shape of each event kind, the kinds in order of first appearance,
    whether it ends with [DONE], and the shape of its last event."""
    shapes, order, last = {}, [], None
    done = False
    for name, data in sse_events(raw):
        if data == "[DONE]":
            done = True
            continue
        key = name if name != "data" else "data"
        if key not in shapes:
            order.append(key)
        shapes[key] = merge(shapes.get(key), shape(data))
        last = shape(data)
    return {"events": order, "shapes": shapes, "done": done, "last": last}


def metric_names(text):
    names = set()
    for line in text.decode().splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
    return sorted(names)


def call(base_url, method, path, body, timeout=120):
    data = None
    headers = {}
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(base_url + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def record(base_url):
    """{name: {"status": int, "shape": ...}} for every request of REQUESTS."""
    out = {}
    for name, method, path, body, kind in REQUESTS:
        status, raw = call(base_url, method, path, body)
        if kind == "metrics" and status == 200:
            got = metric_names(raw)
        elif kind == "sse" and status == 200:
            got = stream_shape(raw)
        else:
            try:
                got = shape(json.loads(raw))
            except ValueError:
                got = "not json: " + raw[:200].decode("utf-8", "replace")
        out[name] = {"status": status, "shape": got}
    return out


def missing(theirs, ours, path=""):
    """Paths in llama-server's shape that ours lacks or holds as another kind (null on either side
    and an empty array match anything)."""
    if theirs is None or theirs == "null" or ours == "null":
        return []
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            return [path + " (object expected)"]
        out = []
        for k, v in theirs.items():
            if k not in ours:
                out.append(path + "." + k)
            else:
                out += missing(v, ours[k], path + "." + k)
        return out
    if isinstance(theirs, list):
        if not isinstance(ours, list):
            return [path + " (array expected)"]
        if not theirs or not ours:
            return []
        return missing(theirs[0], ours[0], path + "[]")
    if isinstance(ours, (dict, list)) or theirs != ours:
        return ["%s (%s expected, got %s)" % (path, theirs, ours if not isinstance(ours, (dict, list)) else "nested")]
    return []
