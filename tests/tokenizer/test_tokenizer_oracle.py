"""Our tokenizers against llama.cpp (llama-cpp-python) on a deterministic corpus of 1,300+
strings per model: ids with add_special + parse_special, ids with neither, detokenization
(llama_detokenize) with and without special tokens, the streaming detokenizer, the
end-of-generation set, and encode speed on a 10k-character prompt (tokenizer_oracle.py caches
the oracle's answers)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from tokenizer_corpus import build_corpus  # noqa: E402
from tokenizer_oracle import compare, oracle, run_probe  # noqa: E402

MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))

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


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"])
def test_tokenizer_matches_llama_cpp(name, tmp_path):
    path = model_path(name)
    items = corpus_items(name)
    assert len(items) >= 1000
    expected = oracle(name, path, items)
    got, summary, _ = run_probe(path, items, tmp_path)
    assert len(got) == len(items)
    mismatches = compare(items, got, expected["results"])
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
    got, summary, _ = run_probe(path, [{"text": text}], tmp_path)
    # the probe encodes twice (with and without special tokens)
    per_encode_ms = summary["encode_seconds"] * 1000 / 2
    print(f"{name}: 10k-character prompt -> {len(got[0]['plain'])} tokens in {per_encode_ms:.1f} ms")
    assert per_encode_ms < 50
