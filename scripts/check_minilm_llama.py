#!/usr/bin/env python3
"""Checks a GGUF from scripts/convert_minilm.py in llama.cpp (llama-cpp-python, the oracle venv):
llama.cpp's own WordPiece ids for each golden text against HF tokenizers' ids, and its mean-pooled
normalised embedding of the text against the numpy oracle's golden vector.

  ~/.cache/cactus/oracle/venv/bin/python scripts/check_minilm_llama.py MODEL.gguf \
      tests/models/data/minilm_golden [--min-cos 0.999]
"""
import argparse
import json
import sys

import numpy as np
from llama_cpp import Llama


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("golden", help="prefix of <golden>.json and <golden>.bin (scripts/minilm_oracle.py)")
    ap.add_argument("--min-cos", type=float, default=0.999)
    args = ap.parse_args()
    with open(args.golden + ".json", encoding="utf-8") as f:
        golden = json.load(f)
    vecs = np.fromfile(args.golden + ".bin", dtype="<f4").reshape(len(golden["sentences"]), golden["dim"])
    llm = Llama(model_path=args.gguf, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512, verbose=False)
    cos, id_mismatch = [], []
    for i, s in enumerate(golden["sentences"]):
        ids = llm.tokenize(s["text"].encode("utf-8"), add_bos=True, special=False)
        if ids != s["ids"]:
            id_mismatch.append(i)
        # embed() takes text only: it reads llama.cpp's ids (checked against the golden ids above).
        e = np.asarray(llm.embed(s["text"], normalize=True), dtype=np.float64)
        cos.append(float(e @ vecs[i] / np.linalg.norm(e) / np.linalg.norm(vecs[i])))
    # A text llama.cpp's tokenizer splits otherwise is no test of the weights: reported, left out.
    same = [c for i, c in enumerate(cos) if i not in id_mismatch]
    worst = min(same)
    print(f"llama.cpp vs oracle over the {len(same)} of {len(cos)} sentences with the same ids: "
          f"min cos {worst:.6f}, mean {np.mean(same):.6f}")
    for i in id_mismatch:
        print(f"  ids differ (llama.cpp's tokenizer): sentence {i} {golden['sentences'][i]['text'][:40]!r} cos {cos[i]:.6f}")
    if worst < args.min_cos:
        sys.exit(f"check_minilm_llama: min cos {worst:.6f} < {args.min_cos}")


if __name__ == "__main__":
    main()
