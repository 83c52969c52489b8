#!/usr/bin/env python3
"""The Gemma 4 checks at the real E2B shape, by hand (minutes on 2 cores; not in CI): the founding
crash report's session (python/tests/gemma4_session.py: 20 tools, thinking on, a forced call, its
role:tool results, a lazy turn, a new user message; compaction on with the real 512-token window
wrapping, then off, on one handle, from a 256 KiB-stack thread) and the forced tool-call rate over
python/tests/tool_requests.py, through the Python package, on the random-weight E2B-shaped file
(scripts/make_gemma4_gguf.py --shape e2b --mix q4_0). Prints per-turn timings, the rate, the peak
RSS, and a Markdown table (docs/GEMMA4.md); exits 1 when a check fails.

  scripts/gemma4_e2b_session.py [--model PATH] [--requests N] [--json OUT]
"""
import argparse
import json
import os
import platform
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "python", "tests"))
os.environ.setdefault("CACTUS_LIBRARY", os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")),
                                                     "lib", "libcactus.so"))

import cactus  # noqa: E402
import gemma4_session as gs  # noqa: E402
from tool_requests import tool_requests  # noqa: E402

DEFAULT_MODEL = os.path.join(os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models")),
                             "gemma4-e2b-q4_0.gguf")
RATE_TOKENS = 160  # forced replies: room for two or three calls


def status_kib(key):
    """A VmHWM / VmRSS line of /proc/self/status, in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def session(path, tools):
    handle = cactus.cactus_init(path)
    try:
        return gs.run_session(handle, "on", tools), gs.run_session(handle, "off", tools)
    finally:
        cactus.cactus_destroy(handle)


def forced_rate(path, count):
    import jsonschema
    handle = cactus.cactus_init(path)
    rows = []
    try:
        for i, (tools, messages, _) in enumerate(tool_requests()[:count]):
            tools = gs.bounded_for_random_weights(tools)
            start = time.monotonic()
            r = cactus.cactus_complete(handle, messages, {"max_tokens": RATE_TOKENS, "temperature": 0.8, "top_k": 40,
                                                          "seed": i + 1, "tool_rag_top_k": 0, "force_tools": True},
                                       tools)
            errors = gs.call_errors(r, tools, jsonschema.Draft202012Validator)
            if not r["function_calls"]:
                errors.append("no call (finish %s)" % r["finish_reason"])
            if r["finish_reason"] == "stop":
                errors += gs.marker_errors(r)
            rows.append({"request": i, "tools": len(tools), "calls": len(r["function_calls"]),
                         "finish": r["finish_reason"], "prompt": r["prompt_tokens"], "prefill": r["prefill_tokens"],
                         "decode": r["decode_tokens"], "prefill_tps": r["prefill_tps"], "decode_tps": r["decode_tps"],
                         "seconds": time.monotonic() - start, "errors": errors})
            print("request %2d: %2d tools, %d calls, %-6s prefill %4d/%4d %6.1f tok/s, decode %3d %5.1f tok/s%s"
                  % (i, len(tools), len(r["function_calls"]), r["finish_reason"], r["prefill_tokens"],
                     r["prompt_tokens"], r["prefill_tps"], r["decode_tokens"], r["decode_tps"],
                     "  " + "; ".join(errors) if errors else ""), flush=True)
    finally:
        cactus.cactus_destroy(handle)
    return rows


def table(turn_rows, rate_rows, peak_mib, window):
    lines = ["| run | turn | prompt | prefilled | decoded | compactions | prefill tok/s | decode tok/s | calls |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, t in turn_rows:
        for k, a in enumerate(t.attempts):
            r = a.response
            name = t.name if t.tries == 1 else "%s, try %d" % (t.name, k + 1)
            lines.append("| compaction %s | %s | %d | %d | %d | %d | %.1f | %.1f | %d |"
                         % (mode, name, r["prompt_tokens"], r["prefill_tokens"], r["decode_tokens"],
                            r["kv_compactions"], r["prefill_tps"], r["decode_tps"], len(r["function_calls"])))
    if rate_rows:
        valid = sum(not row["errors"] for row in rate_rows)
        decode = [row["decode_tps"] for row in rate_rows if row["decode_tps"] > 0]
        header = "| forced requests | valid replies | calls | cut at %d tokens | median decode tok/s |" % RATE_TOKENS
        median = sorted(decode)[len(decode) // 2] if decode else 0.0
        lines += ["", header,
                  "|---:|---:|---:|---:|---:|",
                  "| %d | %d (%.0f%%) | %d | %d | %.1f |"
                  % (len(rate_rows), valid, 100.0 * valid / len(rate_rows), sum(r["calls"] for r in rate_rows),
                     sum(r["finish"] == "length" for r in rate_rows), median)]
    lines += ["", "Peak RSS %.0f MiB; sliding window %d; %s, %d CPUs." % (peak_mib, window, platform.machine(),
                                                                          os.cpu_count())]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--requests", type=int, default=50, help="forced requests of tool_requests (0-50)")
    ap.add_argument("--json", help="write the per-turn and per-request figures here")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.model):
        print("gemma4_e2b_session: %s is missing (scripts/make_gemma4_gguf.py --shape e2b --mix q4_0)" % args.model,
              file=sys.stderr)
        return 2
    import jsonschema
    window = gs.sliding_window(args.model)
    tools = gs.load_tools()
    start = time.monotonic()
    on, off = gs.on_small_stack(session, args.model, tools)
    print(gs.describe(on, "on") + "\n" + gs.describe(off, "off"), flush=True)
    problems = (gs.session_problems(on, "on", tools, jsonschema.Draft202012Validator, window)
                + gs.session_problems(off, "off", tools, jsonschema.Draft202012Validator, window))
    verdict = "all checks hold" if not problems else "FAILED"
    print("session: %.0f s, %s" % (time.monotonic() - start, verdict), flush=True)
    rate_rows = forced_rate(args.model, args.requests) if args.requests else []
    problems += ["request %d: %s" % (row["request"], e) for row in rate_rows for e in row["errors"]]
    peak_mib = status_kib("VmHWM") / 1024.0
    print()
    print(table([("on", t) for t in on] + [("off", t) for t in off], rate_rows, peak_mib, window))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "peak_rss_mib": peak_mib, "window": window,
                       "turns": [dict(a.response, mode=m, turn=t.name, attempt=k + 1, seconds=a.seconds)
                                 for m, ts in (("on", on), ("off", off)) for t in ts
                                 for k, a in enumerate(t.attempts)],
                       "requests": rate_rows}, f, indent=1)
    for p in problems:
        print("problem:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
