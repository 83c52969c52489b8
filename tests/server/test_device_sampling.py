"""`cactus serve` sampling from candidates computed where the logits are (on a GPU by default;
forced here on the CPU with CACTUS_DEVICE_SAMPLING=1): the batched slots get each step's top-k
candidates instead of their logits rows, with ignore_eos's bans applied before the candidates are
taken. Replies, and their mean token probability (the response's "confidence"), are those of a
server that samples from the logits, greedy and seeded, one at a time and two slots at once;
/metrics shows the tokens drawn from candidates, so the path cannot silently be off."""
import json
import threading

import pytest

from serverproc import ServerProcess, metric

COMMON = ["-np", "2", "-c", "2048", "-t", "2"]
PROMPT = "Write three short sentences about the sea."
# name, extra request fields. greedy ends (end of turn) before 96 tokens, so with ignore_eos the
# bans decide its later steps; logprobs and a JSON grammar need the logits and take them.
SETTINGS = [
    ("greedy", {"temperature": 0}),
    ("greedy ignore_eos", {"temperature": 0, "ignore_eos": True}),
    ("top_k ignore_eos", {"temperature": 0.8, "top_k": 40, "seed": 7, "ignore_eos": True}),
    ("top_p", {"temperature": 0.9, "top_p": 0.9, "seed": 3}),
    ("logprobs", {"temperature": 0, "logprobs": True, "top_logprobs": 2}),
    ("json", {"temperature": 0, "response_format": {"type": "json_object"}}),
]
MAX_TOKENS = 96


def start(on):
    return ServerProcess(*COMMON, env={"CACTUS_DEVICE_SAMPLING": "1" if on else "0"})


@pytest.fixture(scope="module")
def from_logits():
    s = start(False)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def from_candidates():
    s = start(True)
    yield s
    assert s.stop() == 0


def chat(server, fields):
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS}
    body.update(fields)
    status, raw, _ = server.post("/v1/chat/completions", body, timeout=300)
    assert status == 200, raw
    reply = json.loads(raw)
    choice = reply["choices"][0]
    return choice["message"]["content"], choice["finish_reason"], reply.get("confidence", 0.0)


def drawn(server):
    return metric(server.get("/metrics")[1].decode(), "cactus_tokens_from_candidates_total")


@pytest.fixture(scope="module")
def expected(from_logits):
    return {name: chat(from_logits, fields) for name, fields in SETTINGS}


def test_the_logits_server_draws_nothing_from_candidates(from_logits, expected):
    assert drawn(from_logits) == 0
    assert expected["greedy"][1] == "stop"  # ends early: ignore_eos's bans matter below
    assert expected["greedy ignore_eos"][1] == "length"


@pytest.mark.parametrize("name,fields", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_replies_are_those_sampled_from_the_logits(from_candidates, expected, name, fields):
    before = drawn(from_candidates)
    text, finish, confidence = chat(from_candidates, fields)
    want_text, want_finish, want_confidence = expected[name]
    assert (text, finish) == (want_text, want_finish)
    assert confidence == pytest.approx(want_confidence, rel=1e-5, abs=1e-7)
    taken = drawn(from_candidates) - before
    if name in ("logprobs", "json"):
        assert taken == 0  # these slots asked for the logits
    else:
        assert taken > 0.8 * MAX_TOKENS if "ignore_eos" in name else taken > 8


def test_two_slots_at_once_give_the_same_replies(from_candidates, expected):
    names = ["greedy ignore_eos", "top_k ignore_eos", "top_p", "json"]
    fields = dict(SETTINGS)
    got = {}

    def run(name):
        got[name] = chat(from_candidates, fields[name])

    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for name in names:
        assert got[name][:2] == expected[name][:2], name


def test_settings_say_where_the_slots_sample(from_logits, from_candidates):
    """llama-server's backend_sampling field, in /props and in a native reply's settings."""
    for server, want in ((from_logits, False), (from_candidates, True)):
        props = json.loads(server.get("/props")[1])
        assert props["default_generation_settings"]["params"]["backend_sampling"] is want
        status, raw, _ = server.post("/completion", {"prompt": "The sea", "n_predict": 2})
        assert status == 200, raw
        assert json.loads(raw)["generation_settings"]["backend_sampling"] is want
