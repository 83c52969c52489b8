"""Gemma 4's tokenizer (tokenizer.ggml.model "gemma4": 262,144 tokens, 514,906 merges) against
llama.cpp, on the vocabulary llama.cpp ships for its own tests (models/ggml-vocab-gemma-4.gguf in
the llama-cpp-python 0.3.36 sdist, which scripts/fetch_llama_sdist.sh downloads; its .inp / .out
cases run in test_llama_vocab_cases.py):
- a corpus of 1,500+ strings (newline runs, tabs, emoji, CJK, code, the turn / tool / thinking
  markers, leading and trailing spaces, invalid UTF-8) gives llama-cpp-python's ids with and
  without special tokens, llama_detokenize's text, and valid UTF-8 when streamed;
- every token's piece equals llama_token_to_piece's, with and without special tokens rendered;
- the end-of-generation set is llama.cpp's (<eos>, <turn|>, <|tool_response>);
- the vocabulary loads in well under a second and a 10k-character prompt encodes fast."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from tokenizer_corpus import CODE_SNIPPETS, build_corpus  # noqa: E402
from tokenizer_oracle import compare, import_llama_cpp, llama_vocab, llama_vocab_cases, oracle, run_probe  # noqa: E402

# Markers of the chat template, tool calls and thinking, as a prompt or a reply carries them.
TEMPLATE_TEXTS = [
    "<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi!<turn|>\n<|turn>model\n",
    "<|turn>user\n<|image|>What is in this picture?<turn|>\n<|turn>model\n",
    "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|>",
    "<|tool_response>response:get_weather{temperature:21}<tool_response|>",
    "<|tool>declaration:get_weather{description:<|\"|>Weather<|\"|>}<tool|>",
    "<|channel>thought\nThe user wants a poem.<channel|>Roses are red.<turn|>",
    "<|think|>\n<|turn>user\n  spaced   <turn|>  \n\n",
    "text<|\"|>quoted<|\"|> and <|\"| broken <|\"|",
]

# Raw bytes (invalid UTF-8 included). Code points above U+10FFFF are left out: llama.cpp's
# re-encoding throws there (std::invalid_argument out of llama_tokenize) and kills the oracle.
RAW_BYTES = [b"\xff\xfe", b"abc\xc3", b"\xe2\x82", b"\xc0\x80 overlong", b"ok \x80\x80 ok", b"\xf0\x9f\x98",
             b"\xed\xa0\x80 surrogate", b"a\n\xff\n\n\xfe", b"\xf4\x8f\xbf\xbf", b" \xe2\x96\x81 ", b"\x80\x80\x80",
             b"<|turn>\xff<turn|>", b"\t\xc3\n\n\n"]


def gemma4_texts():
    texts = build_corpus("gemma-4", n_random=1200)
    texts += ["\n" * k for k in range(1, 71)]  # the newline-run tokens stop at 31
    texts += ["a" + "\n" * k + "b" for k in (1, 2, 3, 30, 31, 32, 33, 62, 63, 64, 65)]
    texts += ["\r\n" * k for k in (1, 2, 5)] + ["\n \n", " \n\n ", "\n\t\n", "x\n\n\n\n\n\n\n\n\n\ny"]
    texts += ["\t" * k for k in (1, 2, 3, 8, 31, 32, 40)] + ["a\tb\t\tc", " \t \t "]
    texts += [" " * k + "x" + " " * k for k in (1, 2, 5, 30, 31, 32, 33, 64)]
    texts += ["日本語のテキストです。", "中文分词测试，标点符号！", "한국어 문장입니다.", "ฉันรักภาษาไทย",
              "emoji 😀😂👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ end", "   🚀  ", "mixed English/日本語 text"]
    texts += CODE_SNIPPETS
    texts += TEMPLATE_TEXTS
    texts += ["hello , world . ' s it ' ll", "I 'm sure you 're right , aren 't you ?", "a ,b . c"]
    return texts


def corpus_items():
    items = [{"text": t} for t in gemma4_texts()]
    items += [{"hex": text.hex()} for text, _ in llama_vocab_cases(llama_vocab("gemma-4"))]
    items += [{"hex": b.hex()} for b in RAW_BYTES]
    return items


def test_gemma4_matches_llama_cpp(tmp_path):
    items = corpus_items()
    assert len(items) >= 1500
    vocab = llama_vocab("gemma-4")
    expected = oracle("gemma-4", vocab, items, pieces=True)
    got, summary, pieces = run_probe(vocab, items, tmp_path, pieces=True)
    assert len(got) == len(items)
    # llama_detokenize cleans spaces before punctuation here (clean_spaces), so text does not
    # always come back as it went in: it must come back as llama.cpp gives it. Streaming joins
    # the pieces uncleaned, as llama.cpp's server streams them.
    mismatches = compare(items, got, expected["results"], round_trip=False, pieces=expected["pieces"])
    round_trips = sum(1 for item, ours in zip(items, got)
                      if "text" in item and bytes.fromhex(ours["plain_decoded"]) == item["text"].encode())
    print(f"gemma-4: {len(items)} strings, {len(items) * 6} checks, {len(mismatches)} mismatches; "
          f"{round_trips} of {sum('text' in i for i in items)} texts round-trip exactly (as in llama.cpp)")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:20])

    wrong = [f"token {i}: llama.cpp {ref}, ours {ours}"
             for i, (ref, ours) in enumerate(zip(expected["pieces"], pieces)) if ref != ours]
    assert len(pieces) == len(expected["pieces"])
    assert not wrong, f"{len(wrong)} token pieces differ:\n" + "\n".join(wrong[:20])

    meta = expected["meta"]
    assert summary["vocab_size"] == meta["n_vocab"] == 262144
    assert (summary["bos"], summary["eos"], summary["eot"]) == (meta["bos"], meta["eos"], meta["eot"]) == (2, 1, -1)
    assert summary["add_bos"] and meta["add_bos"]
    assert sorted(summary["eog"]) == sorted(meta["eog"]) == [1, 50, 106]  # <eos>, <|tool_response>, <turn|>


def long_prompt():
    texts = gemma4_texts()
    text = ""
    i = 0
    while len(text) < 10000:
        text += texts[200 + i % 1000] + "\n"
        i += 1
    return text[:10000]


def test_load_and_encode_speed(tmp_path):
    text = long_prompt()
    vocab = llama_vocab("gemma-4")
    got, summary, _ = run_probe(vocab, [{"text": text}], tmp_path)
    per_encode_ms = summary["encode_seconds"] * 1000 / 2  # the probe encodes twice
    llama_cpp = import_llama_cpp()
    start = time.perf_counter()
    llm = llama_cpp.Llama(model_path=vocab, vocab_only=True, verbose=False)
    llama_load_ms = (time.perf_counter() - start) * 1000
    data = text.encode()
    start = time.perf_counter()
    for _ in range(5):
        reference = llm.tokenize(data, add_bos=False, special=False)
    llama_ms = (time.perf_counter() - start) * 1000 / 5
    assert got[0]["plain"] == reference
    print(f"gemma-4: load {summary['load_seconds'] * 1000:.0f} ms ({summary['load_cpu_seconds'] * 1000:.0f} ms CPU; "
          f"llama.cpp {llama_load_ms:.0f} ms); 10k-character prompt -> {len(reference)} tokens in "
          f"{per_encode_ms:.1f} ms (llama.cpp {llama_ms:.1f} ms)")
    # CPU time: CI machines are shared, and the wall time also counts the other processes
    assert summary["load_cpu_seconds"] < 1.0
    assert per_encode_ms < 50
