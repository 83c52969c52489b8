"""The Gemma 4 session of the founding crash report (Gemma-4-E2B, two turns with 20 tools, thinking on,
KeyDiff compaction, called from a Python thread through ctypes), as an app runs it: a forced call,
the call's results as role:tool messages, a turn under the lazy grammar, then a new user message.
Shared by python/tests/test_gemma4_session.py (the reduced file, CI) and
scripts/gemma4_e2b_session.py (the E2B shape, by hand); tests/api/test_gemma4_session.cpp runs the
same session through the C API.

Random weights: a reply that opens a thought never closes it (one token of 262,144) and a free
string never ends, so the 20 tools (tests/api/data/gemma4_session_tools.json) bound every string
with an enum or a pattern, and a forced turn that only thought is asked again with the next seed
(run_session)."""
import json
import os
import struct
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS_FILE = os.path.join(REPO, "tests", "api", "data", "gemma4_session_tools.json")
# What the visible reply must never hold: Gemma 4's thinking, call and string markers, end of turn.
MARKERS = ("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "<turn|>")
STACK_BYTES = 256 * 1024  # the engine runs from threads with this stack (docs/ARCHITECTURE.md)
MAX_TRIES = 64            # forced turn 1: seeds tried while the reply only thinks
THOUGHT_OPEN = "<|channel>"
FORCED_TOKENS = 384       # turn 1: room for several calls (a random model chains 1-5)
LAZY_TOKENS = 48          # turns 2 and 3: short, so the sliding rings can roll back over them

SYSTEM = ("You are the assistant on the user's phone. Use the tools to act for the user; confirm what "
          "you did in one or two sentences.")
USER_1 = ("I'm taking my parents to dinner tonight. Reserve a table for 4 at Luigi's at 19:30, text my "
          "sister at +4915112345678 that I'm running late, and check the weather in Berlin.")
USER_3 = ("Thanks. Also put 'buy flowers' on my todo list with high priority, and what is 17 * 23 + 4? "
          "After that, play some jazz at volume 30 in the living room.")


def load_tools():
    with open(TOOLS_FILE, encoding="utf-8") as f:
        return json.load(f)


def bounded_for_random_weights(tools, max_chars=12):
    """A copy of tools that a random-weight model can finish calls of. Free strings (no enum, const,
    pattern or format) get the pattern ^[A-Za-z0-9.@-]{1,n}$, n = min(maxLength, max_chars): the gemma
    grammar style drops length limits, and a random model inside an unbounded string picks the closing
    <|"|> once in 262,144 tokens; a short pattern without spaces compiles fast (a space class or a
    40-character bound costs xgrammar seconds per string over this vocabulary). Numbers without bounds
    get +-1e6, integers +-1e9: the grammar allows any exponent or length, and the call reader drops a
    call holding a number beyond the double range (1e309) or a 64-bit integer."""
    def walk(node):
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        node = {k: walk(v) for k, v in node.items()}
        kind = node.get("type")
        if kind == "string" and not {"enum", "const", "pattern", "format"} & set(node):
            node["pattern"] = "^[A-Za-z0-9.@-]{1,%d}$" % min(node.get("maxLength", max_chars), max_chars)
        if kind in ("number", "integer") and "enum" not in node:
            limit = 10 ** 6 if kind == "number" else 10 ** 9
            node.setdefault("minimum", -limit)
            node.setdefault("maximum", limit)
        return node
    return walk(tools)


def options(mode, **extra):
    """Request options of the session. mode "on": a 2048-token context compacted at 2048 rows down to
    512, int8 KV: the ~2,800-token prompt (20 tools) compacts twice in a full prefill (prefill appends
    chunks of 512) and the next compaction would come 1,536 tokens later, never inside the session's
    decodes, so a turn's prompt always diverges after the last compaction and the reuse checks below
    are exact. mode "off": no compaction, f16 KV, a context that holds the whole session."""
    o = {"max_tokens": FORCED_TOKENS, "temperature": 0.8, "top_k": 40, "seed": 7, "tool_rag_top_k": 0,
         "enable_thinking_if_supported": True, "auto_handoff": False}
    if mode == "on":
        o.update(n_ctx=2048, kv_compress=True, kv_compress_at=2048, kv_compress_to=512, kv_cache_type="int8")
    else:
        o.update(n_ctx=4096, kv_compress=False, kv_cache_type="f16")
    o.update(extra)
    return o


def call_errors(response, tools, validator_class):
    """Problems with the reply's calls: a name not offered, arguments that fail the tool's schema."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    errors = []
    for call in response.get("function_calls", []):
        schema = schemas.get(call.get("name"))
        if schema is None:
            errors.append("call of a tool not offered: %r" % (call,))
            continue
        for e in validator_class(schema).iter_errors(call.get("arguments")):
            errors.append("%s: %s (arguments %s)" % (call["name"], e.message, json.dumps(call.get("arguments"))))
    return errors


def marker_errors(response, streamed=None):
    errors = ["response holds %r: %r" % (m, response["response"][:300]) for m in MARKERS if m in response["response"]]
    if streamed is not None:
        errors += ["stream holds %r" % m for m in MARKERS if m in streamed]
    return errors


def tool_result(call):
    """What an app's tool returns: a small JSON object naming the call and echoing an argument."""
    args = call["arguments"] if isinstance(call["arguments"], dict) else {}
    first = next(iter(sorted(args.items())), ("ok", True))
    return json.dumps({"status": "done", "tool": call["name"], first[0]: first[1]})


def answer_calls(messages, reply, turn):
    """Appends the assistant message with the reply's calls (OpenAI form: ids, arguments as an
    object) and one role:tool message per call."""
    calls = [{"id": "call_%d_%d" % (turn, i), "type": "function",
              "function": {"name": c["name"], "arguments": c["arguments"]}}
             for i, c in enumerate(reply["function_calls"])]
    message = {"role": "assistant", "content": reply["response"]}
    if calls:
        message["tool_calls"] = calls
    messages.append(message)
    for call, c in zip(calls, reply["function_calls"]):
        messages.append({"role": "tool", "tool_call_id": call["id"], "name": c["name"], "content": tool_result(c)})


class Attempt:
    def __init__(self, response, streamed, seconds):
        self.response, self.streamed, self.seconds = response, streamed, seconds


class Turn:
    """A turn's attempts (turn 1 may be asked again); the last one is the turn's reply."""

    def __init__(self, name, attempts):
        self.name, self.attempts = name, attempts
        self.response, self.streamed, self.seconds = attempts[-1].response, attempts[-1].streamed, attempts[-1].seconds
        self.tries = len(attempts)


def complete(handle, messages, tools, opts):
    import cactus  # here, so tests/server can use this module's checks without loading the library
    pieces = []
    start = time.monotonic()
    r = cactus.cactus_complete(handle, messages, opts, tools, callback=lambda piece, _id: pieces.append(piece))
    return r, "".join(pieces), time.monotonic() - start


def thought_only(response, stopped_at_thought):
    """A forced reply with no call that thought (random weights never close a thought): cut at
    max_tokens inside it, or, with the retries' stop sequence, stopped where it opened."""
    if response["function_calls"]:
        return False
    if response["finish_reason"] == "length" and response["thinking"]:
        return True
    return stopped_at_thought and response["finish_reason"] == "stop" and response["response"] == ""


def run_session(handle, mode, tools):
    """Turn 1 forced, turn 2 under the lazy grammar after the results, turn 3 after a new user
    message. Returns the Turns; raises only what the binding raises (a C API error). Turn 1 is asked
    again with the next seed while its reply only thinks; the retries stop at the thought's opening
    marker (stop_sequences), so they cost a few tokens (at the E2B shape a random model opens a
    thought in most forced replies)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER_1}]
    base = options(mode)
    attempts = []
    for attempt in range(MAX_TRIES):
        forced = dict(base, force_tools=True, seed=base["seed"] + attempt)
        if attempt:
            forced["stop_sequences"] = [THOUGHT_OPEN]
        attempts.append(Attempt(*complete(handle, messages, tools, forced)))
        if not thought_only(attempts[-1].response, attempt > 0):
            break
    turns = [Turn("turn 1 (forced)", attempts)]
    answer_calls(messages, turns[0].response, 1)
    lazy = dict(base, max_tokens=LAZY_TOKENS)
    turns.append(Turn("turn 2 (lazy)", [Attempt(*complete(handle, messages, tools, lazy))]))
    answer_calls(messages, turns[1].response, 2)
    messages.append({"role": "user", "content": USER_3})
    turns.append(Turn("turn 3 (lazy)", [Attempt(*complete(handle, messages, tools, lazy))]))
    return turns


def both_sessions(path, tools):
    """The session with compaction on, then off, on one handle of the file at path."""
    import cactus
    handle = cactus.cactus_init(path)
    try:
        return run_session(handle, "on", tools), run_session(handle, "off", tools)
    finally:
        cactus.cactus_destroy(handle)


def on_small_stack(fn, *args):
    """Runs fn(*args) on a thread with a 256 KiB stack, as the crash report's app did; returns its
    result or raises its exception here."""
    out, errors = [], []

    def body():
        try:
            out.append(fn(*args))
        except BaseException as e:  # re-raised on the caller's thread
            errors.append(e)

    old = threading.stack_size(STACK_BYTES)
    try:
        thread = threading.Thread(target=body, name="gemma4-session")
        thread.start()
    finally:
        threading.stack_size(old)
    thread.join()
    if errors:
        raise errors[0]
    return out[0]


def sliding_window(path):
    """gemma4.attention.sliding_window of a GGUF file (a u32), read from its head."""
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import gguf_stream
    record = gguf_stream.read_raw_kvs(path)["gemma4.attention.sliding_window"]
    return struct.unpack("<I", record[-4:])[0]


def session_problems(turns, mode, tools, validator_class, window):
    """Every broken invariant of a session, as readable lines (empty when all hold). window: the
    model's sliding window. A sliding ring rolls back at most min(window, 512) tokens (the prefill
    chunk; kv_cache.h), so the cached prefix is reusable when the previous reply fed back no more:
    always for turn 3 (turn 2 is short), for turn 2 when turn 1 was (at window 64 a forced reply
    usually is not, and its tokens differ from the template's re-rendering from the first one)."""
    problems = []
    for t in turns:
        for k, a in enumerate(t.attempts):
            name = t.name if t.tries == 1 else "%s, try %d" % (t.name, k + 1)
            if not a.response.get("success"):
                problems.append("%s: success false: %s" % (name, a.response.get("error")))
            errors = marker_errors(a.response, a.streamed) + call_errors(a.response, tools, validator_class)
            problems += ["%s: %s" % (name, e) for e in errors]
    first = turns[0].response
    if not first["function_calls"]:
        problems.append("turn 1 (forced): no call after %d tries: %r" % (turns[0].tries, first["response"][:300]))
    rollback = min(window, 512)
    for previous, t in zip(turns, turns[1:]):
        r = t.response
        must = previous.response["decode_tokens"] <= rollback
        if must and not r["prefill_tokens"] < r["prompt_tokens"]:
            problems.append("%s: prefix not reused after a %d-token reply (rings roll back %d): prefill %d of %d"
                            % (t.name, previous.response["decode_tokens"], rollback, r["prefill_tokens"],
                               r["prompt_tokens"]))
    compactions = [sum(a.response.get("kv_compactions", 0) for a in t.attempts) for t in turns]
    if mode == "on" and not compactions[0] > 0:
        problems.append("compaction on: turn 1 compacted %r times" % compactions[0])
    if mode == "off" and any(c != 0 for c in compactions):
        problems.append("compaction off: compactions %r" % compactions)
    return problems


def describe(turns, mode):
    lines = []
    for t in turns:
        for k, a in enumerate(t.attempts):
            r = a.response
            name = t.name if t.tries == 1 else "%s %d/%d" % (t.name, k + 1, t.tries)
            lines.append("%-4s %-20s prompt %5d prefill %5d decode %4d compactions %s  %6.1f s  prefill %7.1f tok/s  "
                         "decode %6.1f tok/s  calls %d  finish %s  ram %.0f MB"
                         % (mode, name, r["prompt_tokens"], r["prefill_tokens"], r["decode_tokens"],
                            r.get("kv_compactions"), a.seconds, r["prefill_tps"], r["decode_tps"],
                            len(r["function_calls"]), r["finish_reason"], r["ram_usage_mb"]))
    return "\n".join(lines)
