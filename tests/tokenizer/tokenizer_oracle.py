"""Shared by the tokenizer oracle tests: llama.cpp's answers (llama-cpp-python) for a corpus,
cached under ~/.cache/cactus/oracle/fixtures/ (keyed by the model file's size and mtime, the
corpus and the llama-cpp-python version), and our answers from bin/tokenize_probe."""
import ctypes
import hashlib
import importlib.metadata
import json
import os
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD, "bin", "tokenize_probe")
FIXTURES = os.path.expanduser("~/.cache/cactus/oracle/fixtures")

# The llama-cpp-python sdist: llama.cpp's test vocabularies (models/ggml-vocab-*.gguf with their
# test-tokenizer-0 cases, .inp / .out). scripts/fetch_llama_sdist.sh downloads it; scripts/test.sh
# names it in CACTUS_LLAMA_SDIST.
SDIST = os.environ.get("CACTUS_LLAMA_SDIST",
                       os.path.expanduser("~/.cache/cactus/llama-cpp-sdist/llama_cpp_python-0.3.36"))
CASE_SEPARATOR = b"\n__ggml_vocab_test__\n"  # test-tokenizer-0's

# The fields tokenize_probe writes per string, each compared with llama.cpp's.
FIELDS = ("special", "plain", "decoded", "decoded_special", "plain_decoded")


def llama_vocab(name):
    """Path of llama.cpp's models/ggml-vocab-NAME.gguf; fails when the sdist is missing."""
    path = os.path.join(SDIST, "vendor", "llama.cpp", "models", f"ggml-vocab-{name}.gguf")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing (scripts/fetch_llama_sdist.sh downloads the llama-cpp-python sdist; "
                    "CACTUS_LLAMA_SDIST names an unpacked one)")
    return path


def llama_vocab_cases(path):
    """(input bytes, expected ids) of PATH.inp / PATH.out, read as test-tokenizer-0 reads them."""
    with open(path + ".inp", "rb") as f:
        raw = f.read()
    inputs = []
    pos = 0
    while pos < len(raw):
        end = raw.find(CASE_SEPARATOR, pos)
        if end < 0:
            inputs.append(raw[pos:])
            break
        inputs.append(raw[pos:end])
        pos = end + len(CASE_SEPARATOR)
    with open(path + ".out") as f:
        outputs = f.read().splitlines()
    assert len(inputs) == len(outputs), f"{path}: .inp has {len(inputs)} cases, .out {len(outputs)}"
    return [(text, [int(t) for t in ids.split()]) for text, ids in zip(inputs, outputs)]


def item_bytes(item):
    return bytes.fromhex(item["hex"]) if "hex" in item else item["text"].encode()


def describe(item):
    return repr(item_bytes(item))[:200]


def import_llama_cpp():
    try:
        import llama_cpp
    except ImportError as e:  # CI installs the oracle first; missing means a broken setup
        pytest.fail(f"llama-cpp-python is not importable: {e}")
    return llama_cpp


def oracle_detokenize(llama_cpp, vocab, ids, unparse_special):
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 16 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, unparse_special)
        if n >= 0:
            return buf.raw[:n]
        size = -n + 1


def oracle_piece(llama_cpp, vocab, token, special, buf):
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    if n < 0:  # longer than the buffer
        return oracle_piece(llama_cpp, vocab, token, special, ctypes.create_string_buffer(-n))
    return buf.raw[:n]


def compute_oracle(path, items, pieces=False):
    llama_cpp = import_llama_cpp()
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
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
    data = {"results": results, "meta": meta}
    if pieces:  # every token's piece, without and with special tokens rendered ("-": empty)
        buf = ctypes.create_string_buffer(256)
        data["pieces"] = [" ".join((oracle_piece(llama_cpp, vocab, i, s, buf).hex() or "-") for s in (False, True))
                          for i in range(n_vocab)]
    return data


def oracle(name, path, items, pieces=False):
    stat = os.stat(path)
    version = importlib.metadata.version("llama_cpp_python")
    digest = hashlib.sha256(json.dumps([items, "pieces"] if pieces else items).encode()).hexdigest()[:16]
    key = f"{stat.st_size}-{int(stat.st_mtime)}-{version}-{digest}"
    fixture = os.path.join(FIXTURES, f"tokenizer-{name}-{key}.json")
    if os.path.exists(fixture):
        with open(fixture) as f:
            return json.load(f)
    data = compute_oracle(path, items, pieces)
    os.makedirs(FIXTURES, exist_ok=True)
    with open(fixture + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(fixture + ".tmp", fixture)
    return data


def run_probe(path, items, tmp_path, pieces=False):
    """Our answers: one dict per item, the probe's summary, and (pieces=True) every token's
    pieces as 'HEX HEX' lines like compute_oracle's."""
    if not os.path.exists(PROBE):
        pytest.fail(f"{PROBE} is missing (build the tokenize_probe target)")
    corpus = tmp_path / "corpus.jsonl"
    out = tmp_path / "out.jsonl"
    corpus.write_text("".join(json.dumps(i) + "\n" for i in items))
    args = [PROBE, path, str(corpus), str(out)]
    if pieces:
        args.append(str(tmp_path / "pieces.txt"))
    proc = subprocess.run(args, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    piece_lines = (tmp_path / "pieces.txt").read_text().splitlines() if pieces else None
    return lines[:-1], lines[-1]["summary"], piece_lines


def piece_bytes(pieces, token):
    """The piece of `token` (without special tokens rendered) from compute_oracle's table."""
    plain = pieces[token].split(" ")[0]
    return b"" if plain == "-" else bytes.fromhex(plain)


def compare(items, got, expected, round_trip=True, pieces=None):
    """Mismatches between our answers and llama.cpp's: every field; the streaming output, valid
    UTF-8 equal to the pieces joined with bad bytes replaced (llama.cpp's pieces when `pieces`,
    compute_oracle's table, is given; otherwise the whole decode, for tokenizers whose
    detokenizer does not clean spaces); and, with round_trip, valid text that does not come back
    exactly."""
    mismatches = []
    for item, ours, ref in zip(items, got, expected):
        for field in FIELDS:
            if ours[field] != ref[field]:
                mismatches.append(f"{field} {describe(item)}\n  llama.cpp: {ref[field]}\n  ours:      {ours[field]}")
        if pieces is None:
            joined = bytes.fromhex(ours["decoded"])
        else:
            joined = b"".join(piece_bytes(pieces, t) for t in ref["special"])
        whole = joined.decode("utf-8", errors="replace").encode()
        if ours["streamed"] != whole.hex():
            mismatches.append(f"streamed {describe(item)}: {ours['streamed']} vs {whole.hex()}")
        if round_trip and "text" in item and bytes.fromhex(ours["plain_decoded"]) != item_bytes(item):
            mismatches.append(f"round trip {describe(item)}")
    return mismatches
