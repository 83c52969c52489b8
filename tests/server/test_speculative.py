"""`cactus serve` with speculative decoding (llama-server's --spec-type and --model-draft): greedy
replies are the tokens a server without speculation gives, one slot or two at once; the timings
carry llama-server's draft_n and draft_n_accepted; /props, /slots and /metrics show it; a draft
model with another vocabulary stops the start with a clear message.

The prompts ask for code edits that copy their input (renaming a variable), where drafts are
accepted most. Qwen2.5-Coder-0.5B drafts for itself: its drafts are its own greedy tokens."""
import json
import os
import subprocess
import threading

import pytest

from serverproc import BIN, MODEL, MODELS, ServerProcess, free_port, metric

QWEN = os.path.join(MODELS, "qwen2.5-coder-0.5b.gguf")

pytestmark = pytest.mark.skipif(not os.path.isfile(QWEN), reason="needs qwen2.5-coder-0.5b (cactus pull)")

FUNCTIONS = [
    ("x", "count", "def total(items):\n    x = 0\n    for it in items:\n        x += it.price\n    return x\n"),
    ("buf", "parts", "def join_words(words):\n    buf = []\n    for w in words:\n        if w:\n"
                     "            buf.append(w.strip())\n    return ' '.join(buf)\n"),
    ("n", "size", "int clamp_len(const char* s, int n) {\n    int i = 0;\n    while (i < n && s[i]) ++i;\n"
                  "    return i;\n}\n"),
]
PROMPTS = ["Rename the variable `%s` to `%s` in this function. Reply with the whole function only.\n\n```\n%s```"
           % f for f in FUNCTIONS]
MAX_TOKENS = 72
COMMON = ["-np", "2", "-c", "4096", "-t", "2"]


def start(*args, env=None):
    return ServerProcess(*COMMON, *args, env=env, model=QWEN, alias="qwen")


@pytest.fixture(scope="module")
def plain():
    s = start()
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def ngram():
    """Prompt lookup, set through llama-server's variables: of two spellings of one setting, the
    newer one's variable counts."""
    s = start(env={"LLAMA_ARG_SPEC_TYPE": "ngram-simple", "LLAMA_ARG_SPEC_DRAFT_N_MAX": "12",
                   "LLAMA_ARG_DRAFT_MAX": "3"})
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def drafted():
    """A draft model; the command line wins over a variable of another spelling of --draft-max."""
    s = start("-md", QWEN, "--spec-draft-n-max", "8", "-td", "2", env={"LLAMA_ARG_DRAFT_MAX": "20"})
    yield s
    assert s.stop() == 0


def chat(server, prompt, **extra):
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": MAX_TOKENS}
    body.update(extra)
    status, reply, _ = server.post("/v1/chat/completions", body, timeout=300)
    assert status == 200, reply
    r = json.loads(reply)
    return r["choices"][0]["message"]["content"], r["timings"]


def replies_at_once(server, prompts):
    out = [None] * len(prompts)

    def one(i):
        out[i] = chat(server, prompts[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert all(o is not None for o in out)
    return out


@pytest.fixture(scope="module")
def expected(plain):
    return [chat(plain, p)[0] for p in PROMPTS]


def test_plain_replies_carry_no_draft_counts(plain, expected):
    _, timings = chat(plain, PROMPTS[0])
    assert "draft_n" not in timings and "draft_n_accepted" not in timings
    assert "count" in expected[0]  # the edit was made: the reply copies the function


@pytest.mark.parametrize("kind", ["ngram", "drafted"])
def test_greedy_replies_are_the_plain_ones(kind, expected, request):
    server = request.getfixturevalue(kind)
    drafted_total = accepted_total = 0
    for prompt, want in zip(PROMPTS, expected):
        got, timings = chat(server, prompt)
        assert got == want
        drafted_total += timings.get("draft_n", 0)
        accepted_total += timings.get("draft_n_accepted", 0)
        if "draft_n" in timings:
            assert 0 <= timings["draft_n_accepted"] <= timings["draft_n"]
    assert drafted_total > 0 and accepted_total > 0, (drafted_total, accepted_total)


@pytest.mark.parametrize("kind", ["ngram", "drafted"])
def test_two_slots_at_once_give_the_plain_replies(kind, expected, request):
    server = request.getfixturevalue(kind)
    got = replies_at_once(server, PROMPTS[:2] + PROMPTS[:2])
    assert [g[0] for g in got] == expected[:2] + expected[:2]
    assert sum(g[1].get("draft_n", 0) for g in got) > 0


def test_streamed_reply_is_the_plain_one(ngram, expected):
    body = {"messages": [{"role": "user", "content": PROMPTS[1]}], "temperature": 0, "max_tokens": MAX_TOKENS,
            "stream": True}
    status, raw, _ = ngram.post("/v1/chat/completions", body, timeout=300)
    assert status == 200
    text = ""
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                text += choice.get("delta", {}).get("content") or ""
    assert text == expected[1]


def test_a_grammar_reply_decodes_plainly(ngram, plain):
    prompt = PROMPTS[0] + "\nAnswer as a JSON object with the key \"code\"."
    want, _ = chat(plain, prompt, response_format={"type": "json_object"})
    got, timings = chat(ngram, prompt, response_format={"type": "json_object"})
    assert got == want
    assert "draft_n" not in timings  # the grammar advances token by token: no drafts


def test_props_slots_and_metrics_show_speculation(ngram, drafted, plain):
    for server, types, n_max in ((ngram, "ngram-simple", 12), (drafted, "draft-simple,ngram-simple", 8),
                                 (plain, "none", 0)):
        params = json.loads(server.get("/props")[1])["default_generation_settings"]["params"]
        assert params["speculative.types"] == types
        assert params["speculative.n_max"] == n_max
        slots = json.loads(server.get("/slots")[1])
        assert all(s["speculative"] == (types != "none") for s in slots)
    chat(ngram, PROMPTS[2])
    text = ngram.get("/metrics")[1].decode()
    drafted_n = metric(text, "llamacpp:spec_decode_num_draft_tokens_total")
    assert drafted_n > 0
    assert 0 < metric(text, "llamacpp:spec_decode_num_accepted_tokens_total") <= drafted_n
    assert metric(text, "llamacpp:spec_decode_num_drafts_total") > 0


def run_serve(args, timeout=120):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_")}
    p = subprocess.run([BIN, "serve", *args, "--port", str(free_port())], env=env, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stderr


def test_a_draft_model_with_another_vocabulary_stops_the_start():
    status, err = run_serve([QWEN, "--model-draft", MODEL])
    assert status == 1, err  # an error, not a crash (a signal) nor a usage error
    assert "draft model" in err and "smollm2-135m.gguf" in err and "vocabulary" in err, err


def test_logprobs_are_those_of_plain_decoding(ngram, plain):
    extra = {"logprobs": True, "top_logprobs": 2}
    body = {"messages": [{"role": "user", "content": PROMPTS[0]}], "temperature": 0, "max_tokens": MAX_TOKENS, **extra}
    replies = []
    for server in (plain, ngram):
        status, raw, _ = server.post("/v1/chat/completions", body, timeout=300)
        assert status == 200, raw
        replies.append(json.loads(raw))
    want, got = (r["choices"][0] for r in replies)
    assert got["message"]["content"] == want["message"]["content"]
    assert "draft_n" in replies[1]["timings"]
    assert [t["token"] for t in got["logprobs"]["content"]] == [t["token"] for t in want["logprobs"]["content"]]
    for g, w in zip(got["logprobs"]["content"], want["logprobs"]["content"]):
        assert g["logprob"] == pytest.approx(w["logprob"], abs=1e-4)
        assert [t["token"] for t in g["top_logprobs"]] == [t["token"] for t in w["top_logprobs"]]


def test_a_full_slot_ends_the_reply_where_plain_decoding_does(plain):
    """A slot with room for a few tokens past the prompt: drafts stop at the room, and the reply
    ends with finish_reason length at the same token as without speculation."""
    body = {"messages": [{"role": "user", "content": PROMPTS[0]}], "temperature": 0, "max_tokens": 400}
    prompt_tokens = json.loads(plain.post("/v1/chat/completions", body, timeout=300)[1])["usage"]["prompt_tokens"]
    answers = []
    for args in ([], ["--spec-type", "ngram", "--draft-max", "6"]):
        s = ServerProcess("-np", "2", "-c", str(2 * (prompt_tokens + 12)), "-t", "2", *args, model=QWEN, alias="q")
        try:
            status, raw, _ = s.post("/v1/chat/completions", body, timeout=300)
            assert status == 200, raw
            answers.append(json.loads(raw))
        finally:
            assert s.stop() == 0
    want, got = answers
    assert want["choices"][0]["finish_reason"] == "length"
    assert got["choices"][0]["finish_reason"] == "length"
    assert got["choices"][0]["message"]["content"] == want["choices"][0]["message"]["content"]
    assert got["usage"]["completion_tokens"] == want["usage"]["completion_tokens"]
    assert got["timings"].get("draft_n", 0) > 0
