"""`cactus serve` as a drop-in for llama-server: started exactly as llama-server is usually started
(its flags and LLAMA_ARG_* environment, llama_shapes.FLAGS/ENV), every request of the list answers
with the status and the shape llama-server gives (data/llama_server_shapes.json, recorded from the
real llama-server by scripts/record_llama_server_shapes.py). Shapes are keys and value kinds: the
two engines sample differently, so values are not compared."""
import json
import os

import pytest

import llama_shapes
from serverproc import ServerProcess

GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "data", "llama_server_shapes.json")))

# Where cactus answers otherwise on purpose, with the reason (docs/SERVER.md says the same). A
# waived name lists path prefixes of llama-server's shape left out, or "status" for another status.
WAIVED = {
    # A body that is not JSON is the client's fault: 400 invalid_request_error (llama-server: 500).
    "completion_bad_json": {"status": 400},
    # Erasing a slot's cache needs no file here, so it works without --slot-save-path (llama-server
    # answers 501 then): {id_slot, n_erased}, llama-server's shape when it does erase.
    "slots_erase": {"status": 200},
    # A reply cut at max_output_tokens ends with OpenAI's response.incomplete (status incomplete);
    # llama-server sends response.completed whatever stopped the reply.
    "responses_stream": {"paths": ["event response.completed", "response.completed."]},
}


@pytest.fixture(scope="module")
def ours():
    s = ServerProcess(*llama_shapes.FLAGS, env=llama_shapes.ENV, alias=None)
    try:
        yield llama_shapes.record(s.url)
    finally:
        assert s.stop() == 0


def compare(name, theirs, ours):
    waived = WAIVED.get(name, {}).get("paths", [])
    if isinstance(theirs, dict) and "events" in theirs and "shapes" in theirs:
        assert isinstance(ours, dict) and "events" in ours, "%s: a stream expected, got %s" % (name, ours)
        gaps = ["event %s" % e for e in theirs["events"] if e not in ours["events"]]
        if theirs["done"] != ours["done"]:
            gaps.append("[DONE] %s expected" % ("" if theirs["done"] else "not"))
        for event, s in theirs["shapes"].items():
            gaps += [event + p for p in llama_shapes.missing(s, ours["shapes"].get(event, {}))]
        gaps += ["last" + p for p in llama_shapes.missing(theirs["last"], ours["last"])]
    elif isinstance(theirs, list) and all(isinstance(x, str) for x in theirs):  # metric names
        gaps = [m for m in theirs if m not in ours]
    else:
        gaps = llama_shapes.missing(theirs, ours)
    return [g for g in gaps if not any(g.startswith(w) for w in waived)]


@pytest.mark.parametrize("name", [r[0] for r in llama_shapes.REQUESTS])
def test_answers_like_llama_server(ours, name):
    theirs = GOLDEN["answers"][name]
    got = ours[name]
    status = WAIVED.get(name, {}).get("status", theirs["status"])
    assert got["status"] == status, "%s: status %d, expected %d (llama-server %d): %s" % (
        name, got["status"], status, theirs["status"], json.dumps(got["shape"])[:400])
    if status != theirs["status"]:
        return  # another answer on purpose: its shape is tested where it is built
    gaps = compare(name, theirs["shape"], got["shape"])
    assert not gaps, "%s lacks llama-server's %s" % (name, gaps)


def test_the_golden_covers_every_request():
    assert sorted(GOLDEN["answers"]) == sorted(r[0] for r in llama_shapes.REQUESTS)
    assert GOLDEN["flags"] == llama_shapes.FLAGS and GOLDEN["env"] == llama_shapes.ENV
