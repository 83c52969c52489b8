"""The vocabularies llama.cpp tests its tokenizers with (models/ggml-vocab-NAME.gguf of the
llama-cpp-python 0.3.36 sdist), every one whose tokenizer we implement: byte-level BPE with
several pre-tokenizers, SentencePiece, gemma4's SentencePiece-style BPE and BERT's WordPiece.
- llama.cpp's own cases (tests/test-tokenizer-0: NAME.gguf.inp and .out, add_special and
  parse_special off) give exactly the ids llama.cpp expects;
- the shared corpus (tokenizer_corpus.py, 1,300 strings, invalid UTF-8 included) gives
  llama-cpp-python's ids, detokenized text and streamed text, every token's piece is
  llama_token_to_piece's, and the end-of-generation set is llama.cpp's (gemma-4 has a larger
  corpus of its own in test_tokenizer_gemma4.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from tokenizer_corpus import build_corpus  # noqa: E402
from tokenizer_oracle import FIELDS, compare, llama_vocab, llama_vocab_cases, oracle, run_probe  # noqa: E402

# The sdist's other vocabularies need a tokenizer or pre-tokenizer we do not have (
# deepseek-coder, deepseek-llm, falcon, qwen35) or come without cases (aquila, baichuan,
# gpt-neox, nomic-bert-moe).
# Raw bytes: invalid UTF-8, overlong forms and a surrogate (kept as its bytes, as llama.cpp does).
RAW_BYTES = [b"\xff\xfe", b"abc\xc3", b"\xe2\x82", b"\xc0\x80 overlong", b"ok \x80\x80 ok", b"\xf0\x9f\x98",
             b"\xed\xa0\x80 surrogate"]
VOCABS = ["bert-bge", "gemma-4", "gpt-2", "llama-bpe", "llama-spm", "qwen2", "mpt", "starcoder", "refact", "command-r", "phi-3"]


@pytest.mark.parametrize("name", VOCABS)
def test_llama_cpp_test_cases(name, tmp_path):
    path = llama_vocab(name)
    cases = llama_vocab_cases(path)
    assert len(cases) >= 40
    got, _, _ = run_probe(path, [{"hex": text.hex()} for text, _ in cases], tmp_path)
    failed = [f"{text!r}\n  expected {ids}\n  ours     {ours['plain']}"
              for (text, ids), ours in zip(cases, got) if ours["plain"] != ids]
    print(f"{name}: {len(cases) - len(failed)} of {len(cases)} llama.cpp test cases match")
    assert not failed, f"{len(failed)} of {len(cases)} cases differ:\n" + "\n".join(failed[:10])


@pytest.mark.parametrize("name", [v for v in VOCABS if v not in ("gemma-4", "bert-bge")])
def test_corpus_matches_llama_cpp(name, tmp_path):
    path = llama_vocab(name)
    items = [{"text": t} for t in build_corpus(name)] + [{"hex": b.hex()} for b in RAW_BYTES]
    expected = oracle(f"vocab-{name}", path, items, pieces=True)
    got, summary, pieces = run_probe(path, items, tmp_path, pieces=True)
    assert len(got) == len(items)
    # Detokenized text need not round-trip (llama_detokenize cleans spaces for most BPE
    # pre-tokenizers): it must equal llama.cpp's.
    mismatches = compare(items, got, expected["results"], round_trip=False, pieces=expected["pieces"])
    print(f"{name}: {len(items)} strings, {len(mismatches)} mismatches, load {summary['load_seconds'] * 1000:.0f} ms")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:20])
    wrong = [f"token {i}: llama.cpp {ref}, ours {ours}"
             for i, (ref, ours) in enumerate(zip(expected["pieces"], pieces)) if ref != ours]
    assert len(pieces) == len(expected["pieces"])
    assert not wrong, f"{len(wrong)} token pieces differ:\n" + "\n".join(wrong[:20])
    meta = expected["meta"]
    assert (summary["vocab_size"], summary["bos"], summary["eos"]) == (meta["n_vocab"], meta["bos"], meta["eos"])
    assert summary["add_bos"] == meta["add_bos"]
    assert sorted(summary["eog"]) == sorted(meta["eog"])


def test_bert_corpus_matches_llama_cpp_on_ascii(tmp_path):
    """WordPiece follows Hugging Face tokenizers, and llama.cpp's WPM departs from it outside
    ASCII (Hangul is not decomposed, U+0085 splits words, newer Unicode categories, no
    100-character word limit), so ids are compared with llama.cpp's on the corpus's ASCII strings;
    the rest is checked against Hugging Face's ids in test_wordpiece_tokenizer.cpp. Every token's
    piece, the special ids and the end-of-generation set are llama.cpp's; decoded text is
    llama.cpp's without its leading space (llama.cpp keeps the space of the first word piece)."""
    path = llama_vocab("bert-bge")
    items = [{"text": t} for t in build_corpus("bert-bge") if t.isascii()]
    assert len(items) >= 250
    expected = oracle("vocab-bert-bge-ascii", path, items, pieces=True)
    got, summary, pieces = run_probe(path, items, tmp_path, pieces=True)
    mismatches = []
    for item, ours, ref in zip(items, got, expected["results"]):
        for field in FIELDS:
            want = ref[field]
            if "decoded" in field and want.startswith("20"):
                want = want[2:]
            if ours[field] != want:
                mismatches.append(f"{field} {item['text']!r}\n  llama.cpp: {want}\n  ours:      {ours[field]}")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:20])
    wrong = [i for i, (ref, ours) in enumerate(zip(expected["pieces"], pieces)) if ref != ours]
    assert len(pieces) == len(expected["pieces"]) and not wrong, f"{len(wrong)} token pieces differ"
    meta = expected["meta"]
    assert (summary["vocab_size"], summary["bos"], summary["add_bos"]) == (meta["n_vocab"], meta["bos"], meta["add_bos"])
    assert sorted(summary["eog"]) == sorted(meta["eog"])
