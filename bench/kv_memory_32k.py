"""A 32k-token session on gemma3-270m: KV bytes and resident memory stay at what the layout predicts.

Usage: CACTUS_LIBRARY=build/lib/libcactus.so python3 bench/kv_memory_32k.py [--tokens 32768]
Prefills one long conversation (public-domain text) into a handle with n_ctx = 32768, then decodes a
few tokens, and prints kv_cache_bytes and ram_usage_mb after each step next to the layout's
prediction (global layers: n_ctx rows, or kv_compress_at rows with compaction; sliding layers: a
ring of window + chunk - 1 rows).
"""
import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("CACTUS_LIBRARY", os.path.join(ROOT, "build", "lib", "libcactus.so"))
import cactus  # noqa: E402


def text_source():
    for pattern in ["/usr/share/bible-kjv*/**/*", "/usr/share/common-licenses/*"]:
        files = sorted(f for f in glob.glob(pattern, recursive=True) if os.path.isfile(f))
        if files:
            return "\n".join(open(f, errors="replace").read() for f in files)
    raise SystemExit("no long text found")


def predicted_bytes(kv_type, n_ctx, at=None):
    # gemma3-270m: 18 layers, 1 KV head, head_dim 256; 3 global layers, 15 sliding (window 512).
    # K and V per token and layer, plus the row's position (int32).
    row = {"f16": 2 * 256 * 2 + 4, "int8": 2 * (256 + 8 * 4) + 4}[kv_type]
    global_rows = at if at else n_ctx
    ring_rows = 512 + 512 - 1
    return row * (3 * global_rows + 15 * ring_rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--kv", default="f16", choices=["f16", "int8"])
    args = p.parse_args()
    model = cactus.cactus_init(os.path.expanduser("~/.cache/cactus/models/gemma3-270m.gguf"))
    text = text_source()
    ids = cactus.cactus_tokenize(model, text)
    budget = args.tokens - 64
    while len(ids) < budget:
        text += text
        ids = cactus.cactus_tokenize(model, text)
    # Cut the text to the token budget (roughly 4 characters per token, then trim).
    lo, hi = 0, len(text)
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if len(cactus.cactus_tokenize(model, text[:mid])) < budget:
            lo = mid
        else:
            hi = mid
    messages = [{"role": "user", "content": text[:lo]}]
    options = {"n_ctx": args.tokens, "kv_cache_type": args.kv, "max_tokens": 16, "ignore_eos": True}
    first = cactus.cactus_prefill(model, messages, options)
    second = cactus.cactus_complete(model, messages + [], options)
    rows = [("after prefill", first), ("after 16 decoded tokens", second)]
    print("| step | prompt tokens | kv_cache_bytes | ram_usage_mb |")
    print("|---|---:|---:|---:|")
    for name, r in rows:
        print("| %s | %s | %s | %.1f |" % (name, r.get("prefill_tokens"), r.get("kv_cache_bytes", "-"),
                                          r["ram_usage_mb"]))
    print("\nKV bytes reported by the session: %d; layout arithmetic (compaction at 4096): %d, (full): %d"
          % (second["kv_cache_bytes"], predicted_bytes(args.kv, args.tokens, 4096),
             predicted_bytes(args.kv, args.tokens)))
    print(json.dumps({k: second[k] for k in ["prompt_tokens", "prefill_tokens", "decode_tokens",
                                             "kv_cache_bytes", "ram_usage_mb", "total_time_ms"]}))


if __name__ == "__main__":
    main()
