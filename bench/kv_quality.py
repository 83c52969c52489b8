#!/usr/bin/env python3
"""KV cache quality benchmark (not a CI gate): int8 vs f16 KV, and compaction vs a plain window.

  python3 bench/kv_quality.py [--build DIR] [--model PATH] [--tokens N] [--lengths 1024,2048]

1. Perplexity on a long public-domain text (Debian's bible-kjv-text when installed, else the
   licence texts in /usr/share/common-licenses) with f16 and int8 KV, plus the share of tokens whose
   top-1 prediction is the same and the mean |delta NLL| per token.
2. Passkey retrieval: a 5-digit number hidden at a random depth of filler text, asked for at the
   end; greedy answer must contain it. For each context length: full cache, KeyDiff compaction
   at a 50% budget (the global layers hold at most half the context), and a plain sliding window
   (the same budget, sinks + most recent rows only: kv_compress_recent = 1).
Prints a JSON document and a markdown table (docs/LONG_CONTEXT.md has the numbers).
"""
import argparse
import glob
import json
import math
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def text_corpus():
    kjv = sorted(glob.glob("/usr/share/bible-kjv/*")) + sorted(glob.glob("/usr/share/doc/bible-kjv-text/*"))
    files = [f for f in kjv if os.path.isfile(f)]
    if files:
        return "".join(open(f, errors="replace").read() for f in files), "bible-kjv-text"
    lic = ["GPL-3", "Apache-2.0", "GPL-2", "LGPL-3", "Artistic", "MPL-2.0"]
    paths = [os.path.join("/usr/share/common-licenses", n) for n in lic]
    return "".join(open(p).read() for p in paths if os.path.exists(p)), "common-licenses"


def probe(build, model, text, options, generate=0):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    cmd = [os.path.join(build, "bin", "kv_probe"), model, path, json.dumps(options)]
    if generate:
        cmd += ["generate", str(generate)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600).stdout
    finally:
        os.unlink(path)
    return json.loads(out)


def perplexity(build, model, n_tokens):
    text, source = text_corpus()
    text = text[: n_tokens * 6]
    base = {"max_tokens": n_tokens, "n_ctx": max(n_tokens + 16, 64), "kv_compress": False}
    f16 = probe(build, model, text, dict(base, kv_cache_type="f16"))
    i8 = probe(build, model, text, dict(base, kv_cache_type="int8"))
    ppl = lambda r: math.exp(sum(r["nll"]) / len(r["nll"]))
    same = sum(a == b for a, b in zip(f16["argmax"], i8["argmax"])) / len(f16["argmax"])
    dnll = sum(abs(a - b) for a, b in zip(f16["nll"], i8["nll"])) / len(f16["nll"])
    return {"source": source, "tokens": len(f16["nll"]), "ppl_f16": ppl(f16), "ppl_int8": ppl(i8),
            "top1_agreement": same, "mean_abs_delta_nll": dnll,
            "kv_bytes_f16": f16["kv_bytes"], "kv_bytes_int8": i8["kv_bytes"]}


FILLER = ("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ")


def passkey_prompt(length_tokens, rng):
    key = rng.randint(10000, 99999)
    n = max(1, int(length_tokens / 22))  # ~22 tokens per filler sentence group
    depth = rng.randint(0, n - 1)
    parts = [FILLER] * n
    parts.insert(depth, "The pass key is %d. Remember it. %d is the pass key. " % (key, key))
    prompt = ("There is important info hidden inside a lot of irrelevant text. Find it and memorize it. "
              + "".join(parts) + "\nWhat is the pass key? The pass key is")
    return prompt, key


def passkey(build, model, lengths, trials, kv_type):
    rng = random.Random(1234)
    rows = []
    for length in lengths:
        budget = max(64, length // 2)
        modes = {
            "full": {"kv_compress": False},
            "keydiff_50": {"kv_compress": True, "kv_compress_at": budget, "kv_compress_to": budget // 2},
            "window_50": {"kv_compress": True, "kv_compress_at": budget, "kv_compress_to": budget // 2,
                          "kv_compress_recent": 1.0},
        }
        hits = {m: 0 for m in modes}
        for _ in range(trials):
            prompt, key = passkey_prompt(length, rng)
            for mode, extra in modes.items():
                opts = dict({"n_ctx": length + 256, "kv_cache_type": kv_type, "eval_from": 1 << 30}, **extra)
                r = probe(build, model, prompt, opts, generate=8)
                hits[mode] += str(key) in r["text"]
        rows.append({"length": length, **{m: hits[m] / trials for m in modes}})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("CACTUS_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--model", default=os.path.join(os.environ.get("CACTUS_MODELS", os.path.expanduser(
        "~/.cache/cactus/models")), "gemma3-270m.gguf"))
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--lengths", default="1024,2048,4096")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--kv-type", default="f16")
    args = ap.parse_args()
    result = {"perplexity": perplexity(args.build, args.model, args.tokens)}
    print(json.dumps(result["perplexity"]), file=sys.stderr)
    lengths = [int(x) for x in args.lengths.split(",") if x]
    result["passkey"] = passkey(args.build, args.model, lengths, args.trials, args.kv_type)
    print(json.dumps(result, indent=1))
    p = result["perplexity"]
    print("\n| KV | perplexity | KV bytes |\n|---|---|---|")
    print("| f16 | %.3f | %d |\n| int8 | %.3f | %d |" % (p["ppl_f16"], p["kv_bytes_f16"], p["ppl_int8"], p["kv_bytes_int8"]))
    print("\ntop-1 agreement %.4f, mean |dNLL| %.4f over %d tokens of %s" % (
        p["top1_agreement"], p["mean_abs_delta_nll"], p["tokens"], p["source"]))
    print("\n| context | full | KeyDiff 50% | window 50% |\n|---|---|---|---|")
    for r in result["passkey"]:
        print("| %d | %.2f | %.2f | %.2f |" % (r["length"], r["full"], r["keydiff_50"], r["window_50"]))


if __name__ == "__main__":
    main()
