"""Shared pieces of the by-hand transformers cross-checks (scripts/check_*transformers.py): llama.cpp's
HF -> GGUF converter from the llama-cpp-python sdist (with the vocabulary swapped), a GGUF-to-GGUF
comparison, llama.cpp's logits through the oracle venv, the text model of a VLM saved alone, and the
log-softmax / KL used to compare first-token distributions."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS_MODELS = os.path.join(REPO, "tests", "models")


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


def converter_class(sdist, hf_architecture):
    """The converter's model class for an HF architecture name (e.g. "Qwen3ForCausalLM")."""
    converter_on_path(sdist)
    import convert_hf_to_gguf as conv

    try:  # newer converters load architecture modules lazily (conversion/)
        from conversion import get_model_class

        return get_model_class(hf_architecture)
    except ImportError:
        base = getattr(conv, "ModelBase", None) or getattr(conv, "Model")
        return base.from_model_architecture(hf_architecture)


def convert_f32(sdist, hf_dir, out_path, hf_architecture, set_vocab):
    """llama.cpp's own conversion of hf_dir to an f32 GGUF, its set_vocab replaced by set_vocab(writer)
    (the synthetic models carry no tokenizer worth converting; the tokenizer is not what is checked)."""
    cls = converter_class(sdist, hf_architecture)
    saved = cls.set_vocab
    cls.set_vocab = lambda self: set_vocab(self.gguf_writer)
    try:
        run_converter(sdist, [hf_dir, "--outfile", out_path, "--outtype", "f32"])
    finally:
        cls.set_vocab = saved


def gguf_differences(path_a, path_b, ignore_prefixes=("general.", "GGUF.")):
    """Every difference between two GGUF files in metadata (keys outside ignore_prefixes: value and type)
    and tensors (names, shapes, types, bytes); [] when they hold the same model."""
    from gguf import GGUFReader

    a, b = GGUFReader(path_a), GGUFReader(path_b)
    diffs = []

    def kvs(reader):
        return {k: f for k, f in reader.fields.items() if not k.startswith(ignore_prefixes)}

    ka, kb = kvs(a), kvs(b)
    for key in sorted(set(ka) | set(kb)):
        if key not in ka or key not in kb:
            diffs.append(f"key {key}: only in {'first' if key in ka else 'second'}")
            continue
        fa, fb = ka[key], kb[key]
        if list(fa.types) != list(fb.types):
            diffs.append(f"key {key}: types {[t.name for t in fa.types]} vs {[t.name for t in fb.types]}")
        elif fa.contents() != fb.contents():
            diffs.append(f"key {key}: values differ")
    ta = {t.name: t for t in a.tensors}
    tb = {t.name: t for t in b.tensors}
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            diffs.append(f"tensor {name}: only in {'first' if name in ta else 'second'}")
            continue
        x, y = ta[name], tb[name]
        if list(x.shape) != list(y.shape) or x.tensor_type != y.tensor_type:
            diffs.append(f"tensor {name}: {x.tensor_type.name}{list(x.shape)} vs {y.tensor_type.name}{list(y.shape)}")
        elif bytes(x.data.tobytes()) != bytes(y.data.tobytes()):
            diffs.append(f"tensor {name}: data differ")
    return diffs


def python_has(python, module):
    """Whether the interpreter at `python` exists and imports `module`."""
    if not os.path.exists(python):
        return False
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def llama_cpp_logits(python, gguf_path, prompts, kv_type="f16"):
    """llama.cpp's teacher-forced logits of each prompt (tests/models/model_dump.llama_cpp_logits), run by
    a python that has llama_cpp (the oracle venv): a list of [T, n_vocab] arrays."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.npz")
        code = ("import sys, json, numpy as np; sys.path.insert(0, sys.argv[1]); import model_dump; "
                "rows = model_dump.llama_cpp_logits(sys.argv[2], json.loads(sys.argv[3]), sys.argv[5]); "
                "np.savez(sys.argv[4], *rows)")
        run = subprocess.run([python, "-c", code, TESTS_MODELS, gguf_path, json.dumps(prompts), out, kv_type],
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError("llama.cpp scorer failed: " + run.stderr[-2000:])
        with np.load(out) as z:
            return [z[f"arr_{i}"] for i in range(len(prompts))]


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
