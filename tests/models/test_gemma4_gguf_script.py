"""scripts/make_gemma4_gguf.py, the random-weight Gemma 4 GGUF of a real shape, at its CI size
(--shape reduced: the E2B structure with the real 262144-token vocabulary and E2B chat template):
  - the same seed gives the same bytes (sha256), another seed other bytes, and any tensor regenerated
    alone in chunks of another size gives the bytes in the file;
  - --check (the `gguf` package re-reading the file) finds one corrupted tensor and nothing else;
  - llama.cpp (llama-cpp-python) loads it (Q4_0 and Q8_0) as gemma4 with its hyper-parameters,
    tokenizes the chat markers into their special ids, and its logits over a prompt longer than the
    sliding window and a few greedy tokens are finite, vary with position, spread by about one unit
    (not flat, not at the softcap of 30) and do not pick one token everywhere.
Bad arguments get a clear error."""
import hashlib
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "make_gemma4_gguf.py")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import gguf_stream as gs  # noqa: E402
import make_gemma4_gguf as mk  # noqa: E402

MAX_BYTES = 200 * 2**20  # the reduced file must stay small enough for CI under ASan


def run(*args, check=True):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def printed_sha(p):
    m = re.search(r"sha256 ([0-9a-f]{64})", p.stdout)
    assert m, p.stdout
    return m.group(1)


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gemma4") / "gemma4-reduced-q4_0.gguf")
    p = run("--shape", "reduced", "--mix", "q4_0", "--seed", "3", "--out", path)
    return path, printed_sha(p)


def test_same_seed_same_bytes(reduced, tmp_path):
    path, sha = reduced
    assert file_sha(path) == sha
    assert os.path.getsize(path) < MAX_BYTES
    again = str(tmp_path / "again.gguf")
    assert printed_sha(run("--shape", "reduced", "--mix", "q4_0", "--seed", "3", "--out", again)) == sha
    other = str(tmp_path / "other.gguf")
    assert printed_sha(run("--shape", "reduced", "--mix", "q4_0", "--seed", "4", "--out", other)) != sha


@pytest.fixture(scope="module")
def offsets(reduced):
    """{tensor name: absolute file offset}, read by scripts/gguf_stream.py (the gguf package takes
    ~30 s over the 777k vocabulary strings; --check uses it, once, in the corruption test)."""
    return {name: off for name, (_, _, off) in gs.read_tensor_infos(reduced[0]).items()}


def test_tensor_regenerates_alone(reduced, offsets):
    """Streams do not depend on chunking: a tensor regenerated in odd-sized chunks is the file's bytes;
    tensor_values (what a float reference loads) is what the gguf package dequantizes from them."""
    import gguf
    from gguf import quants

    path, _ = reduced
    specs = {s.name: s for s in mk.tensor_specs(mk.Model("reduced"), "q4_0")}
    data = np.memmap(path, dtype=np.uint8, mode="r")
    for name in ("token_embd.weight", "blk.7.ffn_down.weight", "blk.4.attn_k_norm.weight",
                 "per_layer_model_proj.weight", "blk.9.layer_output_scale.weight"):
        s = specs[name]
        want = np.concatenate([c.reshape(-1).view(np.uint8) for c in mk.tensor_chunks(s, 3, chunk=997)])
        start = offsets[name]
        assert np.array_equal(data[start:start + want.size], want), name
        theirs = quants.dequantize(np.array(data[start:start + want.size]), gguf.GGMLQuantizationType(s.ggml_type))
        ours = mk.tensor_values(s, 3)
        assert ours.shape == tuple(reversed(s.ne)), name
        assert np.array_equal(ours.reshape(-1), np.asarray(theirs, dtype=np.float32).reshape(-1)), name


def test_check_finds_one_corrupted_tensor(reduced, offsets, tmp_path):
    path, _ = reduced
    bad = str(tmp_path / "bad.gguf")
    shutil.copyfile(path, bad)
    offset = offsets["blk.2.attn_v.weight"]
    with open(bad, "r+b") as f:
        f.seek(offset + 5)
        byte = f.read(1)
        f.seek(offset + 5)
        f.write(bytes([byte[0] ^ 0x5A]))
    p = run("--shape", "reduced", "--mix", "q4_0", "--seed", "3", "--out", bad, "--check-only", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("check:")]
    assert errors == ["check: blk.2.attn_v.weight: the first bytes differ from the regenerated ones"], p.stderr


def test_full_size_specs():
    """The E2B and E4B tensor lists without writing them (research/GEMMA4.md §1.1, §2.2): parameter
    counts (llama-bench reports the E2B file as 4.63 B), KV-shared layers without K/V, FFN widths."""
    e2b = mk.Model("e2b")
    specs = {s.name: s for s in mk.tensor_specs(e2b, "q4_0")}
    assert len(specs) == 541 and sum(int(np.prod(s.ne)) for s in specs.values()) == 4628569635
    assert [il for il in range(35) if f"blk.{il}.attn_k.weight" not in specs] == list(range(15, 35))
    assert [il for il in range(35) if not e2b.is_swa[il]] == [4, 9, 14, 19, 24, 29, 34]
    assert specs["blk.14.ffn_gate.weight"].ne == (1536, 6144) and specs["blk.15.ffn_down.weight"].ne == (12288, 1536)
    assert specs["blk.34.attn_q.weight"].ne == (1536, 8 * 512) and specs["blk.13.attn_k.weight"].ne == (1536, 256)
    assert specs["per_layer_token_embd.weight"].ne == (35 * 256, 262144)
    assert specs["per_layer_model_proj.weight"].ggml_type == gs.F16
    assert np.array_equal(np.float32(specs["rope_freqs.weight"].params), np.float32([1.0] * 64 + [1e30] * 192))
    e4b = mk.Model("e4b")
    specs = {s.name: s for s in mk.tensor_specs(e4b, "q8_0")}
    assert len(specs) == 666 and [il for il in range(42) if not e4b.is_swa[il]] == list(range(5, 42, 6))
    assert [il for il in range(42) if f"blk.{il}.attn_v.weight" not in specs] == list(range(24, 42))
    assert {s.ne for n, s in specs.items() if n.endswith("ffn_up.weight")} == {(2560, 10240)}


def test_bad_arguments_are_refused(tmp_path):
    p = run("--shape", "e9b", check=False)
    assert p.returncode == 2 and "invalid choice: 'e9b'" in p.stderr
    p = run("--shape", "reduced", "--vocab", str(tmp_path / "none.gguf"), "--out", str(tmp_path / "x.gguf"), check=False)
    assert p.returncode != 0 and "none.gguf" in p.stderr
    not_gguf = tmp_path / "not.gguf"
    not_gguf.write_bytes(b"GGML" + bytes(64))
    p = run("--shape", "reduced", "--vocab", str(not_gguf), "--out", str(tmp_path / "x.gguf"), check=False)
    assert p.returncode != 0 and "not a GGUF file" in p.stderr
    assert not os.path.exists(tmp_path / "x.gguf")


@pytest.mark.parametrize("mix", ["q4_0", "q8_0"])
def test_llama_cpp_loads_and_decodes(mix, reduced, tmp_path):
    import llama_cpp

    path = reduced[0]
    if mix != "q4_0":
        path = str(tmp_path / f"gemma4-reduced-{mix}.gguf")
        run("--shape", "reduced", "--mix", mix, "--seed", "3", "--out", path)
    m = mk.Model("reduced")
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, logits_all=True, n_threads=2, verbose=False)
    meta = llm.metadata
    assert meta["general.architecture"] == "gemma4"
    assert int(meta["gemma4.block_count"]) == m.n_layer and int(meta["gemma4.attention.shared_kv_layers"]) == 5
    assert llm.n_vocab() == mk.N_VOCAB and llm.n_embd() == m.n_embd
    with open(mk.first_existing(mk.TEMPLATE_CANDIDATES, "template"), encoding="utf-8") as f:
        assert meta["tokenizer.chat_template"] == f.read()

    turn = b"<|turn>user\nWhat is the weather in Paris, and what should I wear?<turn|>\n<|turn>model\n"
    ids = llm.tokenize(turn * 8, add_bos=True, special=True)
    assert ids[0] == 2 and ids.count(105) == 16 and ids.count(106) == 8  # <bos>, <|turn>, <turn|>
    assert len(ids) > 2 * m.window  # past the sliding window of 64
    llm.eval(ids)
    logits = np.array(llm.scores[:len(ids)], dtype=np.float64)  # [n_tokens, n_vocab]
    out = [int(np.argmax(logits[-1]))]
    for _ in range(7):  # greedy decode, one token at a time
        llm.eval(out[-1:])
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        assert np.all(np.isfinite(row))
        out.append(int(np.argmax(row)))
    assert np.all(np.isfinite(logits))
    std = logits.std(axis=1)
    assert np.all((std > 0.3) & (std < 8.0)), (std.min(), std.max())
    assert np.abs(logits).max() < 29.0  # the softcap 30 bounds them; far below it is not saturated
    assert np.abs(logits[1:] - logits[:-1]).max() > 0.5  # each position sees different inputs
    # No token wins everywhere (weights with a common mean make one "hub" token the argmax of most rows).
    assert len(set(np.argmax(logits, axis=1).tolist())) > len(ids) // 4
    print(f"llama.cpp {mix}: {len(ids)} prompt tokens, logit std {std.mean():.2f} "
          f"(min {std.min():.2f}, max {std.max():.2f}), max |logit| {np.abs(logits).max():.1f}, greedy {out}")
