#!/usr/bin/env python3
"""Cost of constrained decoding per token on Qwen2.5-Coder-0.5B with 20 tools offered.

Runs the same 20-tool request alternately with force_tools (grammar on) and with
constrain_tool_calls=false (no grammar), several rounds, and prints per-token decode time of both
and the grammar's own time (mask + advance, measured inside the sampler) per token, as JSON and a
table. The machine is shared: read the ratio of the alternated runs, not the absolute numbers.
usage: CACTUS_LIBRARY=build/lib/libcactus.so python3 bench/grammar_mask_cost.py [rounds]"""
import json
import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "python", "tests"))
os.environ.setdefault("CACTUS_LIBRARY", os.path.join(REPO, "build", "lib", "libcactus.so"))

import cactus  # noqa: E402
from tool_requests import TOOLS  # noqa: E402


def decode_ms_per_token(r):
    return (r["total_time_ms"] - r["time_to_first_token_ms"]) / max(r["decode_tokens"] - 1, 1)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    models = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
    handle = cactus.cactus_init(os.path.join(models, "qwen2.5-coder-0.5b.gguf"))
    tools = TOOLS[:20]
    messages = [{"role": "user", "content": "Book a flight from Boston to Lisbon on 2025-06-01 for 2 adults and 1 child, "
                 "then order two margherita pizzas and one salad from Luigi's."}]
    base = {"max_tokens": 128, "temperature": 0, "tool_rag_top_k": 0}
    cactus.cactus_complete(handle, messages, dict(base, max_tokens=4), tools)  # prompt into the cache
    runs = {"grammar": [], "free": [], "mask": []}
    for _ in range(rounds):
        g = cactus.cactus_complete(handle, messages, dict(base, force_tools=True), tools)
        f = cactus.cactus_complete(handle, messages, dict(base, constrain_tool_calls=False, ignore_eos=True,
                                                          max_tokens=g["decode_tokens"]), tools)
        runs["grammar"].append(decode_ms_per_token(g))
        runs["free"].append(decode_ms_per_token(f))
        runs["mask"].append(g["constraint_ms"] / max(g["decode_tokens"], 1))
    out = {k: statistics.median(v) for k, v in runs.items()}
    out["decode_tokens"] = g["decode_tokens"]
    out["mask_fraction_of_step"] = out["mask"] / out["free"]
    print(json.dumps(out))
    print("| decode ms/token, no grammar | with grammar | grammar mask+advance ms/token | share of a step |")
    print("|---|---|---|---|")
    print("| %.2f | %.2f | %.3f | %.1f%% |" % (out["free"], out["grammar"], out["mask"], 100 * out["mask_fraction_of_step"]))
    cactus.cactus_destroy(handle)


if __name__ == "__main__":
    main()
