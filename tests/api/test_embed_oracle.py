"""Decoder embeddings against llama.cpp (llama-cpp-python, the oracle venv): the mean of the final
hidden states after the output norm, L2-normalised, is what llama.cpp's embedding mode with mean
pooling returns for the same GGUF. Encoder (MiniLM) embeddings are checked against numpy goldens
in tests/models."""
import ctypes
import os

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))

TEXTS = [
    "The cat sat on the mat.",
    "Paris is the capital of France.",
    "def add(a, b):\n    return a + b",
    "Café déjà vu — naïve résumé, 東京 and Москва.",
    "A somewhat longer sentence that goes on for a while, so that the mean runs over more tokens "
    "than a handful, with numbers 1234 and punctuation!?",
]


@pytest.fixture(scope="module")
def lib():
    lib = ctypes.CDLL(os.path.join(BUILD_DIR, "lib", "libcactus.so"))
    lib.cactus_init.restype = ctypes.c_void_p
    lib.cactus_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool]
    lib.cactus_embed.restype = ctypes.c_int
    lib.cactus_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_size_t), ctypes.c_bool]
    lib.cactus_destroy.argtypes = [ctypes.c_void_p]
    lib.cactus_get_last_error.restype = ctypes.c_char_p
    return lib


def cactus_embeddings(lib, path, texts):
    handle = lib.cactus_init(path.encode(), None, False)
    assert handle, lib.cactus_get_last_error()
    try:
        out = []
        for text in texts:
            buf = (ctypes.c_float * 8192)()
            dim = ctypes.c_size_t(0)
            rc = lib.cactus_embed(handle, text.encode(), buf, ctypes.sizeof(buf), ctypes.byref(dim), True)
            assert rc > 0, lib.cactus_get_last_error()
            out.append(np.array(buf[:rc], dtype=np.float64))
        return out
    finally:
        lib.cactus_destroy(handle)


@pytest.mark.parametrize("name", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_decoder_mean_pooling_matches_llama_cpp(lib, name):
    llama_cpp = pytest.importorskip("llama_cpp")
    path = os.path.join(MODELS, name + ".gguf")
    assert os.path.exists(path), path
    ours = cactus_embeddings(lib, path, TEXTS)
    peer = llama_cpp.Llama(model_path=path, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                           n_ctx=512, n_batch=512, n_threads=2, verbose=False)
    for text, v in zip(TEXTS, ours):
        ref = np.array(peer.embed(text, normalize=True), dtype=np.float64)
        assert ref.shape == v.shape
        cos = float(v @ ref / (np.linalg.norm(v) * np.linalg.norm(ref)))
        # llama.cpp keeps an f16 KV cache and we an int8/f16 one: 1e-3 covers both on these widths.
        assert cos > 0.999, (name, text, cos)
