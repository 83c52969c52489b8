"""Forced tool calls on Gemma 4 through the Python package: the 50 requests of tool_requests.py on the
reduced random-weight file (CACTUS_GEMMA4_MODEL names another), force_tools on: every reply holds at
least one call, of an offered tool, whose arguments validate with jsonschema (100%, asserted); a reply
that ended holds no Gemma marker in `response` or the stream. The tools' free strings and numbers are
bounded (gemma4_session.bounded_for_random_weights says why a random model needs it). Replies cut at
max_tokens (a random model may chain calls) are counted and printed; their finished calls are
validated too."""
import os

import pytest

import cactus
import gemma4_session as gs
from cactus_test_paths import model_path
from tool_requests import tool_requests

jsonschema = pytest.importorskip("jsonschema")

BASE = {"max_tokens": 256, "temperature": 0.8, "top_k": 40, "tool_rag_top_k": 0, "force_tools": True}


@pytest.fixture(scope="module")
def gemma4():
    handle = cactus.cactus_init(os.environ.get("CACTUS_GEMMA4_MODEL") or model_path("gemma4-reduced-q4_0"))
    yield handle
    cactus.cactus_destroy(handle)


def test_forced_tool_calls_always_parse_and_validate(gemma4):
    requests = tool_requests()
    assert len(requests) == 50
    valid, cut, calls, problems, compile_ms, tokens = 0, 0, 0, [], 0.0, 0
    for i, (tools, messages, _) in enumerate(requests):
        tools = gs.bounded_for_random_weights(tools)
        pieces = []
        r = cactus.cactus_complete(gemma4, messages, dict(BASE, seed=i + 1), tools,
                                   callback=lambda piece, _id: pieces.append(piece))
        assert r["success"], r["error"]
        errors = gs.call_errors(r, tools, jsonschema.Draft202012Validator)
        if not r["function_calls"]:
            errors.append("no call: %r (finish %s)" % (r["response"][:200], r["finish_reason"]))
        if r["finish_reason"] == "stop":
            errors += gs.marker_errors(r, "".join(pieces))
        else:
            cut += 1
        valid += not errors
        calls += len(r["function_calls"])
        compile_ms += r["constraint_compile_ms"]
        tokens += r["decode_tokens"]
        problems += ["request %d: %s" % (i, e) for e in errors]
    print("\nGemma 4 force_tools (Python package): %d/%d replies hold only valid calls (%.0f%%), %d calls; "
          "%d replies cut at max_tokens; %d tokens; grammars compiled in %.1f s"
          % (valid, len(requests), 100.0 * valid / len(requests), calls, cut, tokens, compile_ms / 1000))
    assert not problems, "\n".join(problems)
