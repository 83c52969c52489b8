#!/usr/bin/env python3
"""Requantizes a GGUF file with llama.cpp's own quantizer (llama_model_quantize of llama-cpp-python,
allow_requantize on), for bench/compare_llama.py's "other quant mixes" rows. Run with the
oracle venv's Python (scripts/setup_oracle.sh):

  ~/.cache/cactus/oracle/venv/bin/python bench/requantize.py ~/.cache/cactus/models/gemma3-270m.gguf Q8_0 \
      ~/.cache/cactus/requant/gemma3-270m-Q8_0.gguf

Formats: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_M, Q5_K_M, Q6_K (F32: the exact dequantized
weights, for measurements that leave out the activation quantization, docs/LONG_CONTEXT.md). Requantizing from an already quantized file
goes through f32, as llama-quantize --allow-requantize does."""
import ctypes
import os
import sys

FTYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q6_K": 18, "Q4_K_M": 15, "Q5_K_M": 17}


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in FTYPES:
        sys.exit("usage: requantize.py IN.gguf {%s} OUT.gguf" % ",".join(FTYPES))
    src, fmt, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    if not os.path.isfile(src):
        sys.exit("requantize: no such file: %s" % src)
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[fmt]
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    tmp = dst + ".part"
    rc = llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), ctypes.byref(params))
    if rc != 0:
        sys.exit("requantize: llama_model_quantize returned %d" % rc)
    os.replace(tmp, dst)
    print("%s -> %s (%s, %.1f MiB)" % (src, dst, fmt, os.path.getsize(dst) / 2**20))


if __name__ == "__main__":
    main()
