"""Shared pieces of the by-hand transformers cross-checks (scripts/check_*_transformers.py): llama.cpp's
HF -> GGUF converter from the llama-cpp-python sdist, the text model of a VLM saved alone, and the
log-softmax / KL used to compare first-token distributions."""
import os
import sys

import numpy as np


def converter_on_path(sdist):
    """Puts the sdist's llama.cpp folder and its gguf-py (the converter needs its own) first on sys.path."""
    llama_dir = os.path.join(sdist, "vendor", "llama.cpp")
    for p in (os.path.join(llama_dir, "gguf-py"), llama_dir):
        if p not in sys.path:
            sys.path.insert(0, p)


def run_converter(sdist, argv):
    """convert_hf_to_gguf.py with the arguments argv, in this process (so callers can patch its classes)."""
    converter_on_path(sdist)
    import convert_hf_to_gguf as conv

    saved = sys.argv
    sys.argv = ["convert_hf_to_gguf.py"] + argv
    try:
        conv.main()
    finally:
        sys.argv = saved


def save_text_model(lm_class, config, text_state, lm_head, hf_dir):
    """The language model of a VLM alone, as lm_class(config) with an untied head, saved to hf_dir."""
    lm = lm_class(config).float().eval()
    state = {"model." + k: v for k, v in text_state.items()}
    state["lm_head.weight"] = lm_head
    missing = lm.load_state_dict(state, strict=False).missing_keys
    if missing:
        sys.exit(f"save_text_model: weights not copied: {missing}")
    lm.save_pretrained(hf_dir, safe_serialization=True)


def log_softmax(x):
    x = np.asarray(x, np.float64)
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def kl(p, q):
    """KL(p || q) of two log-probability vectors."""
    return float(np.sum(np.exp(p) * (p - q)))
