"""Our tokenizers against llama.cpp (llama-cpp-python) on a deterministic corpus of 1,300+
strings per model: ids with add_special + parse_special, ids with neither, detokenization
(llama_detokenize) with and without special tokens, the streaming detokenizer, the
end-of-generation set, and encode speed on a 10k-character prompt.

The oracle's answers are cached under ~/.cache/cactus/oracle/fixtures/, keyed by the model
file's size and mtime, the corpus and the llama-cpp-python version."""
import ctypes
import hashlib
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from tokenizer_corpus import build_corpus  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD, "bin", "tokenize_probe")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
FIXTURES = os.path.expanduser("~/.cache/cactus/oracle/fixtures")

# Raw byte strings (invalid UTF-8 included): the tokenizers must not crash and must agree.
RAW_BYTES = [b"\xff\xfe", b"abc\xc3", b"\xe2\x82", b"\xc0\x80 overlong", b"ok \x80\x80 ok", b"\xf0\x9f\x98"]


def model_path(name):
    path = os.path.join(MODELS, name + ".gguf")
    if not os.path.exists(path):
        pytest.fail(f"model {path} is missing (run the model setup script)")
    return path


def corpus_items(name):
    items = [{"text": t} for t in build_corpus(name)]
    items += [{"hex": b.hex()} for b in RAW_BYTES]
    return items


def item_bytes(item):
    return bytes.fromhex(item["hex"]) if "hex" in item else item["text"].encode()


def oracle_detokenize(llama_cpp, vocab, ids, unparse_special):
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 16 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, unparse_special)
        if n >= 0:
            return buf.raw[:n]
        size = -n + 1


def compute_oracle(path, items):
    try:
        import llama_cpp
        from llama_cpp import Llama
    except ImportError as e:  # CI installs the oracle first; missing means a broken setup
        pytest.fail(f"llama-cpp-python is not importable: {e}")
    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    results = []
    for item in items:
        data = item_bytes(item)
        special = llm.tokenize(data, add_bos=True, special=True)
        plain = llm.tokenize(data, add_bos=False, special=False)
        results.append({
            "special": special,
            "plain": plain,
            "decoded": oracle_detokenize(llama_cpp, vocab, special, False).hex(),
            "decoded_special": oracle_detokenize(llama_cpp, vocab, special, True).hex(),
            "plain_decoded": oracle_detokenize(llama_cpp, vocab, plain, False).hex(),
        })
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    eog = [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    meta = {"bos": llama_cpp.llama_vocab_bos(vocab), "eos": llama_cpp.llama_vocab_eos(vocab),
            "eot": llama_cpp.llama_vocab_eot(vocab), "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
            "eog": eog, "n_vocab": n_vocab}
    return {"results": results, "meta": meta}


def oracle(name, path, items):
    import importlib.metadata
    stat = os.stat(path)
    version = importlib.metadata.version("llama_cpp_python")
    digest = hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]
    key = f"{stat.st_size}-{int(stat.st_mtime)}-{version}-{digest}"
    fixture = os.path.join(FIXTURES, f"tokenizer-{name}-{key}.json")
    if os.path.exists(fixture):
        with open(fixture) as f:
            return json.load(f)
    data = compute_oracle(path, items)
    os.makedirs(FIXTURES, exist_ok=True)
    with open(fixture + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(fixture + ".tmp", fixture)
    return data


def run_probe(path, items, tmp_path):
    if not os.path.exists(PROBE):
        pytest.fail(f"{PROBE} is missing (build the tokenize_probe target)")
    corpus = tmp_path / "corpus.jsonl"
    out = tmp_path / "out.jsonl"
    corpus.write_text("".join(json.dumps(i) + "\n" for i in items))
    proc = subprocess.run([PROBE, path, str(corpus), str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return lines[:-1], lines[-1]["summary"]


def describe(item):
    return repr(item_bytes(item))[:200]


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"])
def test_tokenizer_matches_llama_cpp(name, tmp_path):
    path = model_path(name)
    items = corpus_items(name)
    assert len(items) >= 1000
    expected = oracle(name, path, items)
    got, summary = run_probe(path, items, tmp_path)
    assert len(got) == len(items)

    mismatches = []
    for item, ours, ref in zip(items, got, expected["results"]):
        for field in ("special", "plain", "decoded", "decoded_special", "plain_decoded"):
            if ours[field] != ref[field]:
                mismatches.append(f"{field} {describe(item)}\n  llama.cpp: {ref[field]}\n  ours:      {ours[field]}")
        # streaming output: valid UTF-8, same text as the whole decode with bad bytes replaced
        whole = bytes.fromhex(ours["decoded"]).decode("utf-8", errors="replace").encode()
        if ours["streamed"] != whole.hex():
            mismatches.append(f"streamed {describe(item)}: {ours['streamed']} vs {whole.hex()}")
        # valid text round-trips exactly
        if "text" in item and bytes.fromhex(ours["plain_decoded"]) != item_bytes(item):
            mismatches.append(f"round trip {describe(item)}")
    total = len(items) * 7
    rate = 1.0 - len(mismatches) / total
    print(f"{name}: {len(items)} strings, {total} checks, match rate {rate:.4%}, "
          f"probe encode time {summary['encode_seconds'] * 1000:.1f} ms")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:20])

    meta = expected["meta"]
    assert summary["vocab_size"] == meta["n_vocab"]
    assert summary["bos"] == meta["bos"]
    assert summary["eos"] == meta["eos"]
    assert summary["add_bos"] == meta["add_bos"]
    assert sorted(summary["eog"]) == sorted(meta["eog"])
    assert summary["eot"] in meta["eog"]


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"])
def test_encode_speed_on_long_prompt(name, tmp_path):
    path = model_path(name)
    corpus = build_corpus(name)
    text = ""
    i = 0
    while len(text) < 10000:
        text += corpus[200 + i % 1000] + "\n"
        i += 1
    text = text[:10000]
    got, summary = run_probe(path, [{"text": text}], tmp_path)
    # the probe encodes twice (with and without special tokens)
    per_encode_ms = summary["encode_seconds"] * 1000 / 2
    print(f"{name}: 10k-character prompt -> {len(got[0]['plain'])} tokens in {per_encode_ms:.1f} ms")
    assert per_encode_ms < 50
