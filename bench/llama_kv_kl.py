#!/usr/bin/env python3
"""llama.cpp's own KV-precision cost, measured as kv_probe's `compare` measures ours: the same text,
teacher-forced, f16 K/V against q8_0 K/V, true KL(P_f16 || P_q8_0) over the full vocabulary per
predicted token (docs/LONG_CONTEXT.md, "How sensitive this model is"). Run with the oracle venv:

  ~/.cache/cactus/oracle/venv/bin/python bench/llama_kv_kl.py MODEL.gguf TEXT_FILE [--tokens 1024]

With --b-model OTHER.gguf (another file of the same model, e.g. MODEL's F32 dequantization from
bench/requantize.py as A and the quantized file as B) B reads that file, with --b-kv f16 or q8_0 K/V.
"""
import argparse

import numpy as np
from llama_cpp import Llama

GGML_TYPE_F16, GGML_TYPE_Q8_0 = 1, 8
KV_TYPES = {"f16": GGML_TYPE_F16, "q8_0": GGML_TYPE_Q8_0}


def logits(model, text, n_tokens, kv_type, threads):
    llm = Llama(model, n_ctx=n_tokens + 64, n_batch=256, n_ubatch=256, logits_all=True, verbose=False,
                type_k=kv_type, type_v=kv_type, flash_attn=True, n_threads=threads)
    ids = llm.tokenize(text.encode(), add_bos=True)[:n_tokens]
    llm.eval(ids)
    return ids, np.array(llm.scores[:len(ids) - 1], dtype=np.float64)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--b-model", help="B reads this file instead of MODEL")
    ap.add_argument("--b-kv", choices=sorted(KV_TYPES), default="q8_0", help="K/V type of B (A: f16)")
    a = ap.parse_args()
    text = open(a.text, encoding="utf-8").read()
    ids, f16 = logits(a.model, text, a.tokens, GGML_TYPE_F16, a.threads)
    ids_b, q8 = logits(a.b_model or a.model, text, a.tokens, KV_TYPES[a.b_kv], a.threads)
    if ids_b != ids:
        raise SystemExit("llama_kv_kl: the two files tokenize the text differently")
    lp, lq = log_softmax(f16), log_softmax(q8)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    targets = np.array(ids[1:])
    rows = np.arange(len(targets))
    print("tokens %d  mean KL %.5f  p99 %.4f  max %.3f  top-1 agreement %.2f%%  ppl A %.4f B %.4f" %
          (len(kl), kl.mean(), np.quantile(kl, 0.99), kl.max(), 100 * (lp.argmax(1) == lq.argmax(1)).mean(),
           np.exp(-lp[rows, targets].mean()), np.exp(-lq[rows, targets].mean())))


if __name__ == "__main__":
    main()
