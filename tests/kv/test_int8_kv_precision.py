"""The int8 KV cache's own precision cost: KL(P_f16 || P_int8) of the next-token distribution, on
weights that nothing else rounds (docs/LONG_CONTEXT.md, "What int8 costs by itself").

On the quantized files every matmul quantizes its activations to 8 bits, and any last-bit change
upstream (int8 K/V included) flips some of those roundings: f16 against int8 KV then reads
KL 0.034 on gemma3-270m, as llama.cpp's q8_0 cache does (0.036), while the same activation
rounding alone costs 0.021 against exact weights. So this test reads the cache's cost where it is
not drowned: each model's F32 dequantization (llama.cpp's quantizer, exact values of the file's
weights; matmuls in f32), f16 against int8 K/V, teacher-forced over the same tokens. Measured at
1,024 tokens: gemma3 0.0026 (llama.cpp's q8_0 0.0030), smollm2 0.0014 (0.0008). The bar is the
issue's: under 0.005.

With kv_cache_type f32 as the reference (nothing in attention rounded), the same probe reads what
each precision costs against exact rows: f16 a mean KL of 2.3e-6 (smollm2) and 3.8e-6 (gemma3),
int8 0.0014 and 0.0027, at 768 tokens.

Text: Genesis 1-2, King James Version (public domain; Debian's bible-kjv-text), verse numbers
stripped: tests/kv/data/genesis_1-2.txt.
"""
import json
import os
import statistics
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
MODELS_DIR = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
REQUANT_DIR = os.path.expanduser("~/.cache/cactus/requant")
PROBE = os.path.join(BUILD_DIR, "bin", "kv_probe")
TEXT = os.path.join(REPO, "tests", "kv", "data", "genesis_1-2.txt")

KL_LIMIT = 0.005
# 768 tokens: past gemma3's 512-token sliding window, so its local layers attend to a window, not
# to every row.
OPTIONS = {"n_ctx": 1024, "prefill_chunk": 256, "threads": 2, "max_tokens": 768}


def f32_copy(name):
    """The model's weights dequantized to F32 by llama.cpp's quantizer, cached beside the requantized
    files of bench/compare_llama.py and rebuilt when the source file is newer."""
    src = os.path.join(MODELS_DIR, name)
    dst = os.path.join(REQUANT_DIR, name.replace(".gguf", "-F32.gguf"))
    if os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src):
        return dst
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = 0  # LLAMA_FTYPE_ALL_F32
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    os.makedirs(REQUANT_DIR, exist_ok=True)
    tmp = dst + ".part"
    assert llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), ctypes.byref(params)) == 0
    os.replace(tmp, dst)
    return dst


def mean_kl(model, type_a, type_b):
    """Mean KL(P_a || P_b) over the text's next tokens, caches of kv_cache_type type_a and type_b."""
    a = dict(OPTIONS, kv_cache_type=type_a)
    b = dict(OPTIONS, kv_cache_type=type_b)
    b.pop("max_tokens")
    out = subprocess.run([PROBE, model, TEXT, json.dumps(a), "compare", json.dumps(b)],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["tokens"] == OPTIONS["max_tokens"], "the text is shorter than the test needs"
    assert doc["kv_bytes_b"] < doc["kv_bytes"], f"B did not use the smaller {type_b} cache"
    return statistics.mean(doc["kl"])


def kl_f16_vs_int8(model):
    return mean_kl(model, "f16", "int8")


@pytest.mark.parametrize("name", ["smollm2-135m.gguf", "gemma3-270m.gguf"])
def test_int8_kv_cost_on_exact_weights(name):
    if not os.path.exists(os.path.join(MODELS_DIR, name)):
        pytest.skip(f"{name} not pulled (scripts/test.sh pulls it)")
    kl = kl_f16_vs_int8(f32_copy(name))
    print(f"{name}: mean KL(f16 || int8 KV) on F32 weights = {kl:.5f}")
    assert 0.0 < kl < KL_LIMIT


# f16 rows cost about 1e-3 of what int8 rows cost (see the docstring): the bound leaves 10x room
# above the measured 4e-6 and stays far below int8's 1e-3, so a path that rounded the f32 cache to
# f16 (KL 0) or broke it (KL of int8's size or more) fails.
F16_VS_F32_LIMIT = 5e-5


@pytest.mark.parametrize("name", ["smollm2-135m.gguf", "gemma3-270m.gguf"])
def test_f32_kv_is_the_exact_reference(name):
    if not os.path.exists(os.path.join(MODELS_DIR, name)):
        pytest.skip(f"{name} not pulled (scripts/test.sh pulls it)")
    model = f32_copy(name)
    kl_f16 = mean_kl(model, "f32", "f16")
    kl_int8 = mean_kl(model, "f32", "int8")
    print(f"{name}: mean KL against the f32 KV cache: f16 {kl_f16:.3g}, int8 {kl_int8:.3g}")
    assert 0.0 < kl_f16 < F16_VS_F32_LIMIT
    assert kl_f16 < kl_int8 < KL_LIMIT
