#!/usr/bin/env python3
"""KV cache quality benchmark (not a CI gate): int8 vs f16 KV, and compaction vs a plain window.

  python3 bench/kv_quality.py [--build DIR] [--model PATH] [--tokens N] [--lengths 1024,2048,4096]
                              [--trials 5] [--modes full,keydiff_50,...] [--threads 2] [--seed 1234]

Needs Debian's bible-kjv-text and bible-kjv (apt-get install -y bible-kjv-text) and bin/kv_probe.
Deterministic: greedy decoding, a seeded RNG for the pass keys, fixed text and chunking.
1. Next-token quality on Genesis (KJV, public domain), first N tokens: the probe runs a reference
   cache A and a variant B on the same tokens in the same chunks and reports, per token, the true
   KL(P_A || P_B) over the full vocabulary, both NLLs and both top-1 ids. Rows: f16 with another
   prefill chunk (the floating-point noise floor), int8 vs f16, KeyDiff compaction vs the full
   cache, a plain window vs the full cache.
2. Passkey retrieval: a 5-digit number hidden at evenly spread depths of filler text, asked for at
   the end ("The pass key is"); a trial passes when the greedy 8-token answer contains it. For
   each context length: the full cache, KeyDiff compaction with the global layers holding at most
   half the context, and a plain sliding window (sinks + most recent rows, kv_compress_recent = 1)
   of the same budget, with 4 and with 32 sinks.
Prints a JSON document, then markdown tables (docs/LONG_CONTEXT.md has the numbers).
"""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kjv_text():
    """Genesis from Debian's bible-kjv-text (read with the `bible` tool of bible-kjv), verse
    numbers stripped, one verse per line."""
    try:
        out = subprocess.run(["bible", "-f", "gen1:1-gen50:26"], capture_output=True, text=True,
                             check=True, timeout=120).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("bible-kjv-text is needed: apt-get install -y bible-kjv-text bible-kjv (%s)" % e)
    lines = [re.sub(r"^\w+?\d+:\d+ ", "", l) for l in out.splitlines() if l.strip()]
    return "\n".join(lines) + "\n"


def probe(build, model, text, options, generate=0, compare=None):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    cmd = [os.path.join(build, "bin", "kv_probe"), model, path, json.dumps(options)]
    if generate:
        cmd += ["generate", str(generate)]
    if compare is not None:
        cmd += ["compare", json.dumps(compare)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600).stdout
    finally:
        os.unlink(path)
    return json.loads(out)


def compare_row(build, model, text, name, a, b, differ_from=0):
    """Runs A and B on the same tokens; KL(P_A || P_B) over the full vocabulary per token.
    kl_mean_differing: the mean over the tokens from differ_from on (where B's cache can differ)."""
    r = probe(build, model, text, a, compare=b)
    n = len(r["kl"])
    kl = sorted(r["kl"])
    tail = r["kl"][differ_from:]
    row = {"name": name, "tokens": n, "kl_mean_differing": sum(tail) / len(tail), "differ_from": differ_from,
           "ppl_a": math.exp(sum(r["nll"]) / n), "ppl_b": math.exp(sum(r["nll_b"]) / n),
           "kl_mean": sum(kl) / n, "kl_p99": kl[min(n - 1, int(0.99 * n))], "kl_max": kl[-1],
           "top1_agreement": sum(x == y for x, y in zip(r["argmax"], r["argmax_b"])) / n,
           "kv_bytes_a": r["kv_bytes"], "kv_bytes_b": r["kv_bytes_b"],
           "compactions_b": r["compactions_b"]}
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def perplexity(build, model, n_tokens, threads, with_compaction):
    text = kjv_text()[: n_tokens * 8]
    n_ctx = n_tokens + 16
    base = {"max_tokens": n_tokens, "n_ctx": n_ctx, "kv_compress": False, "threads": threads,
            "prefill_chunk": 256}
    f16 = dict(base, kv_cache_type="f16")
    # The noise floor: the same f16 cache fed in chunks of 61 instead of 256 tokens (only the
    # order of floating-point sums changes).
    rows = [compare_row(build, model, text, "f16, prefill chunk 61 vs 256 (noise floor)", f16,
                        dict(f16, prefill_chunk=61))]
    rows.append(compare_row(build, model, text, "int8 vs f16 (full cache)", f16, dict(base, kv_cache_type="int8")))
    if with_compaction:
        at = n_tokens // 2
        comp = dict(f16, kv_compress=True, kv_compress_at=at, kv_compress_to=at // 2)
        rows.append(compare_row(build, model, text, "KeyDiff %d -> %d vs full (f16)" % (at, at // 2), f16, comp, at))
        win = dict(comp, kv_compress_recent=1.0)
        rows.append(compare_row(build, model, text, "window %d -> %d vs full (f16)" % (at, at // 2), f16, win, at))
    return rows


FILLER = ("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ")
TOKENS_PER_FILLER = 24.4  # gemma3 tokenizer, measured


def passkey_prompt(length_tokens, depth, rng):
    """A 5-digit key hidden at `depth` (0..1) of filler text, about length_tokens tokens long."""
    key = rng.randint(10000, 99999)
    n = max(2, int((length_tokens - 45) / TOKENS_PER_FILLER))
    parts = [FILLER] * n
    parts.insert(int(round(depth * n)), "The pass key is %d. Remember it. %d is the pass key. " % (key, key))
    prompt = ("There is important info hidden inside a lot of irrelevant text. Find it and memorize it. "
              + "".join(parts) + "\nWhat is the pass key? The pass key is")
    return prompt, key


def passkey_modes(length):
    """Full cache; KeyDiff and a plain window (sinks + most recent) whose global layers never hold
    more than length/2 rows: compaction at length/2 rows down to length/2 - 128 (rolling)."""
    budget = length // 2
    step = min(128, budget // 4)
    comp = {"kv_compress": True, "kv_compress_at": budget, "kv_compress_to": budget - step,
            "kv_compress_sinks": 4}
    return {"full": {"kv_compress": False},
            "keydiff_50": dict(comp, kv_compress_recent=0.3),
            "window_50": dict(comp, kv_compress_recent=1.0),
            # the same window with 32 sinks: the whole instruction sentence stays in the cache
            "window_50_s32": dict(comp, kv_compress_sinks=32, kv_compress_recent=1.0)}


MODE_TITLES = {"full": "full", "keydiff_50": "KeyDiff 50%", "window_50": "window 50% (4 sinks)",
               "window_50_s32": "window 50% (32 sinks)"}


def passkey(build, model, lengths, trials, kv_type, threads, seed, wanted):
    rng = random.Random(seed)
    rows = []
    for length in lengths:
        modes = {m: o for m, o in passkey_modes(length).items() if m in wanted}
        hits = {m: 0 for m in modes}
        tokens, misses = [], []
        for i in range(trials):
            depth = (i + 0.5) / trials  # evenly spread depths: 10%, 30%, ... for 5 trials
            prompt, key = passkey_prompt(length, depth, rng)
            for mode, extra in modes.items():
                opts = dict({"n_ctx": length + 256, "kv_cache_type": kv_type, "eval_from": 1 << 30,
                             "threads": threads}, **extra)
                r = probe(build, model, prompt, opts, generate=8)
                ok = str(key) in r["text"]
                hits[mode] += ok
                tokens.append(r["tokens"])
                if not ok:
                    misses.append({"mode": mode, "depth": depth, "key": key, "answer": r["text"]})
        rows.append({"length": length, "prompt_tokens": [min(tokens), max(tokens)], "trials": trials,
                     **{m: hits[m] / trials for m in modes}, "misses": misses})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def print_tables(result):
    if result.get("perplexity"):
        print("\n| B vs reference A | tokens | ppl A | ppl B | mean KL(A‖B) | mean KL where caches differ | p99 KL | max KL | top-1 agreement | KV bytes A | KV bytes B |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in result["perplexity"]:
            print("| %s | %d | %.4f | %.4f | %.5f | %.5f (from token %d) | %.4f | %.3f | %.2f%% | %s | %s |" % (
                r["name"], r["tokens"], r["ppl_a"], r["ppl_b"], r["kl_mean"], r["kl_mean_differing"],
                r["differ_from"], r["kl_p99"], r["kl_max"],
                100 * r["top1_agreement"], format(r["kv_bytes_a"], ","), format(r["kv_bytes_b"], ",")))
    if result.get("passkey"):
        print("\n| context | prompt tokens | trials | " + " | ".join(MODE_TITLES.values()) + " |")
        print("|---|---|---|" + "---|" * len(MODE_TITLES))
        for r in result["passkey"]:
            cells = ["%.2f" % r[m] if m in r else "-" for m in MODE_TITLES]
            print("| %d | %d-%d | %d | %s |" % (r["length"], r["prompt_tokens"][0], r["prompt_tokens"][1],
                                                r["trials"], " | ".join(cells)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("CACTUS_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--model", default=os.path.join(os.environ.get("CACTUS_MODELS", os.path.expanduser(
        "~/.cache/cactus/models")), "gemma3-270m.gguf"))
    ap.add_argument("--tokens", type=int, default=4096, help="perplexity tokens; 0 skips the perplexity part")
    ap.add_argument("--no-compaction-ppl", action="store_true", help="skip the compaction rows of the perplexity table")
    ap.add_argument("--lengths", default="1024,2048,4096", help="passkey context lengths; empty skips")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--kv-type", default="f16", help="KV precision of the passkey runs")
    ap.add_argument("--modes", default=",".join(MODE_TITLES), help="passkey cache modes: " + ",".join(MODE_TITLES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    unknown = set(args.modes.split(",")) - set(MODE_TITLES)
    if unknown:
        sys.exit("unknown --modes %s; known: %s" % (",".join(sorted(unknown)), ",".join(MODE_TITLES)))
    result = {}
    if args.tokens > 0:
        result["perplexity"] = perplexity(args.build, args.model, args.tokens, args.threads,
                                          not args.no_compaction_ppl)
    lengths = [int(x) for x in args.lengths.split(",") if x]
    if lengths:
        result["passkey"] = passkey(args.build, args.model, lengths, args.trials, args.kv_type, args.threads,
                                    args.seed, args.modes.split(","))
    print(json.dumps(result, indent=1))
    print_tables(result)


if __name__ == "__main__":
    main()
