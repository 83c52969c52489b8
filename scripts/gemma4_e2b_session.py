#!/usr/bin/env python3
"""The Gemma 4 checks at the real E2B shape, by hand (minutes on 2 cores; not in CI): the founding
crash report's session (python/tests/gemma4_session.py: 20 tools, thinking on, a forced call, its
role:tool results, a lazy turn, a new user message; compaction on with the real 512-token window
wrapping, then off, on one handle, from a 256 KiB-stack thread) and the forced tool-call rate over
python/tests/tool_requests.py, through the Python package, on the random-weight E2B-shaped file
(scripts/make_gemma4_gguf.py --shape e2b --mix q4_0). Prints per-turn timings, the rate, the peak
RSS, and a Markdown table (docs/GEMMA4.md); exits 1 when a check fails.

  scripts/gemma4_e2b_session.py [--model PATH] [--requests N] [--json OUT]
  scripts/gemma4_e2b_session.py --table OUT      (the tables of a recorded run)
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
                         "seconds": round(time.monotonic() - start, 2), "errors": errors})
            print("request %2d: %2d tools, %d calls, %-6s prefill %4d/%4d %6.1f tok/s, decode %3d %5.1f tok/s%s"
                  % (i, len(tools), len(r["function_calls"]), r["finish_reason"], r["prefill_tokens"],
                     r["prompt_tokens"], r["prefill_tps"], r["decode_tokens"], r["decode_tps"],
                     "  " + "; ".join(errors) if errors else ""), flush=True)
    finally:
        cactus.cactus_destroy(handle)
    return rows


TURN_FIELDS = ("prompt_tokens", "prefill_tokens", "decode_tokens", "kv_compactions", "prefill_tps", "decode_tps",
               "finish_reason", "ram_usage_mb")


def turn_rows(mode, turns):
    """The recorded figures of every reply of a session (no text)."""
    rows = []
    for t in turns:
        for k, a in enumerate(t.attempts):
            row = {f: a.response[f] for f in TURN_FIELDS}
            row.update(mode=mode, turn=t.name, attempt=k + 1, tries=t.tries, seconds=round(a.seconds, 2),
                       calls=len(a.response["function_calls"]))
            rows.append(row)
    return rows


def table(record):
    """The Markdown tables of a record (this script's --json), as docs/GEMMA4.md shows them. Turn 1's
    retries that stopped at the thought's opening are one line."""
    lines = ["| run | turn | prompt | prefilled | decoded | compactions | prefill tok/s | decode tok/s | calls | s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def line(r, name):
        lines.append("| compaction %s | %s | %d | %d | %d | %d | %.1f | %.1f | %d | %.1f |"
                     % (r["mode"], name, r["prompt_tokens"], r["prefill_tokens"], r["decode_tokens"],
                        r["kv_compactions"], r["prefill_tps"], r["decode_tps"], r["calls"], r["seconds"]))

    rows = record["turns"]
    for i, r in enumerate(rows):
        last = r["attempt"] == r["tries"]
        if r["tries"] == 1:
            line(r, r["turn"])
        elif r["attempt"] == 1 or last:
            line(r, "%s, try %d of %d" % (r["turn"], r["attempt"], r["tries"]))
        elif r["attempt"] == 2:
            stopped = rows[i:i + r["tries"] - 2]
            lines.append("| compaction %s | %s, tries 2-%d: stopped at `<\\|channel>` | %d | | %d in all | | | | 0 "
                         "| %.1f |" % (r["mode"], r["turn"], r["tries"] - 1, r["prompt_tokens"],
                            sum(x["decode_tokens"] for x in stopped), sum(x["seconds"] for x in stopped)))
    rate = record["requests"]
    if rate:
        valid = sum(not row["errors"] for row in rate)
        decode = sorted(row["decode_tps"] for row in rate if row["decode_tps"] > 0)
        prefill = sorted(row["prefill_tps"] for row in rate if row["prefill"] > 256)
        lines += ["", "| forced requests | valid replies | calls | cut at %d tokens | prefill tok/s (whole prompts, "
                  "median) | decode tok/s (median) |" % record["rate_tokens"],
                  "|---:|---:|---:|---:|---:|---:|",
                  "| %d | %d (%.0f%%) | %d | %d | %.1f | %.1f |"
                  % (len(rate), valid, 100.0 * valid / len(rate), sum(r["calls"] for r in rate),
                     sum(r["finish"] == "length" for r in rate), prefill[len(prefill) // 2] if prefill else 0.0,
                     decode[len(decode) // 2] if decode else 0.0)]
    lines += ["", "Peak RSS (VmHWM) %.0f MiB; sliding window %d; %s." % (record["peak_rss_mib"], record["window"],
                                                                        record["machine"])]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--requests", type=int, default=50, help="forced requests of tool_requests (0-50)")
    ap.add_argument("--json", help="write the figures here (per reply, per request; no text)")
    ap.add_argument("--table", metavar="JSON", help="print the tables of a recorded --json file and exit")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(table(json.load(f)))
        return 0
    if not os.path.isfile(args.model):
        print("gemma4_e2b_session: %s is missing (scripts/make_gemma4_gguf.py --shape e2b --mix q4_0)" % args.model,
              file=sys.stderr)
        return 2
    import jsonschema
    window = gs.sliding_window(args.model)
    tools = gs.load_tools()
    start = time.monotonic()
    on, off = gs.on_small_stack(gs.both_sessions, args.model, tools)
    print(gs.describe(on, "on") + "\n" + gs.describe(off, "off"), flush=True)
    problems = (gs.session_problems(on, "on", tools, jsonschema.Draft202012Validator, window)
                + gs.session_problems(off, "off", tools, jsonschema.Draft202012Validator, window))
    verdict = "all checks hold" if not problems else "FAILED"
    print("session: %.0f s, %s" % (time.monotonic() - start, verdict), flush=True)
    rate_rows = forced_rate(args.model, args.requests) if args.requests else []
    problems += ["request %d: %s" % (row["request"], e) for row in rate_rows for e in row["errors"]]
    record = {"model": os.path.basename(args.model), "window": window, "rate_tokens": RATE_TOKENS,
              "peak_rss_mib": round(status_kib("VmHWM") / 1024.0),
              "machine": "%s, %d CPUs, %s" % (platform.machine(), os.cpu_count(), time.strftime("%Y-%m-%d")),
              "turns": turn_rows("on", on) + turn_rows("off", off), "requests": rate_rows}
    print()
    print(table(record))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    for p in problems:
        print("problem:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
