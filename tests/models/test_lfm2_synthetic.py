"""LFM2 (short convolutions + GQA attention) on synthetic weights at LFM2-350M's widths
(tests/models/lfm2_synthetic.py writes the f32 GGUF with gguf-py), against llama.cpp
(llama-cpp-python) on the same file, both with the KV cache in f16 (the default of both):
  - teacher forcing over 48 tokens: every row's log-probabilities (max |dlogp|, KL(llama || ours));
  - greedy 16 tokens from several prompts, identical (ours generated; llama.cpp's argmax checked
    on every row of prompt + ours, which is its own greedy continuation when all rows agree);
  - the single-token decode path after a prompt prefilled in chunks of 1, 7 and all tokens (the
    conv state carried across calls) scores the same continuation as llama.cpp.
The other state properties (several sequences in one batch, prefix reuse, rewinds) are checked in
C++ on a small file (tests/models/test_lfm2_state.cpp)."""
import json
import os
import subprocess

import numpy as np
import pytest

from lfm2_synthetic import write_lfm2

gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "model_probe")
KL_MAX = 0.01


def log_softmax(row):
    row = np.asarray(row, dtype=np.float64)
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


def kl(p_log, q_log):
    """KL(p || q) from log-probabilities."""
    p_log = np.asarray(p_log, dtype=np.float64)
    q_log = np.asarray(q_log, dtype=np.float64)
    return float(np.sum(np.exp(p_log) * (p_log - q_log)))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lfm2") / "lfm2.gguf")
    n_vocab = write_lfm2(path, seed=7)
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True, n_threads=2, verbose=False)
    assert os.path.exists(PROBE), PROBE
    probe = subprocess.Popen([PROBE, path, "--threads", "2", "--ctx", "512"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield path, n_vocab, llm, probe
    probe.stdin.close()
    probe.wait(timeout=60)


def ask(probe, request):
    probe.stdin.write(json.dumps(request) + "\n")
    probe.stdin.flush()
    line = probe.stdout.readline()
    assert line, probe.stderr.read()
    reply = json.loads(line)
    assert "error" not in reply, reply
    return reply


def llama_rows(llm, tokens):
    llm.reset()
    llm.eval(tokens)
    return [log_softmax(llm.scores[i]) for i in range(len(tokens))]


def test_lfm2_logprobs_match_llama_cpp(model):
    _, n_vocab, llm, probe = model
    rng = np.random.default_rng(5)
    tokens = [int(t) for t in rng.integers(0, n_vocab - 4, size=48)]
    theirs = llama_rows(llm, tokens)
    reply = ask(probe, {"tokens": tokens, "score_from": 1, "score_ids": [list(range(n_vocab))] * (len(tokens) - 1)})
    ours = reply["score_logprobs"]  # rows predicting tokens 1..47 = llama rows 0..46
    worst = max(float(np.max(np.abs(np.asarray(o) - t))) for o, t in zip(ours, theirs))
    kls = [kl(t, o) for o, t in zip(ours, theirs)]
    agree = sum(int(np.argmax(o)) == int(np.argmax(t)) for o, t in zip(ours, theirs))
    print(f"\nlfm2 synthetic 350M widths: max |dlogp| {worst:.2e}, KL first {kls[0]:.2e} max {max(kls):.2e} "
          f"mean {np.mean(kls):.2e}, argmax agree {agree}/{len(ours)}")
    assert kls[0] < KL_MAX and max(kls) < KL_MAX
    assert agree >= len(ours) - 1


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_lfm2_greedy_matches_llama_cpp(model, seed):
    """Our greedy 16 tokens, and llama.cpp's argmax at every row of prompt + those tokens (one
    batch): equal row by row means llama.cpp's own greedy continuation is the same 16 tokens."""
    _, n_vocab, llm, probe = model
    rng = np.random.default_rng(seed)
    prompt = [int(t) for t in rng.integers(0, n_vocab - 4, size=int(rng.integers(5, 40)))]
    ours = ask(probe, {"tokens": prompt, "n_predict": 16})["generated"]
    rows = llama_rows(llm, prompt + ours[:-1])[len(prompt) - 1:]
    theirs = [int(np.argmax(r)) for r in rows]
    print(f"\nprompt of {len(prompt)}: ours  {ours}\n{' ' * 15}llama {theirs}")
    assert ours == theirs


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_lfm2_chunked_prefill_then_decode(model, chunk):
    _, n_vocab, llm, probe = model
    rng = np.random.default_rng(21)
    prompt = [int(t) for t in rng.integers(0, n_vocab - 4, size=23)]
    cont = [int(t) for t in rng.integers(0, n_vocab - 4, size=8)]
    theirs = llama_rows(llm, prompt + cont)[len(prompt) - 1:len(prompt) + len(cont) - 1]
    reply = ask(probe, {"tokens": prompt, "chunk": chunk, "decode_ids": cont,
                        "score_ids": [list(range(n_vocab))] * len(cont)})
    ours = reply["decode_logprobs"]
    kls = [kl(t, o) for o, t in zip(ours, theirs)]
    print(f"\nchunk {chunk}: KL max {max(kls):.2e}")
    assert max(kls) < KL_MAX
    assert reply["decode_argmax"] == [int(np.argmax(t)) for t in theirs]


SMALL = dict(n_embd=256, n_layer=6, n_head=4, n_head_kv=2, n_ff=512, attn_layers=(2, 5), l_cache=3)


def test_lfm2_multi_turn_prefix_reuse_through_the_c_api(tmp_path):
    """Two chat turns on one handle (the second reuses the first's cache: the engine rewinds to the
    common prefix, conv state included) give the second reply a fresh handle gives. A narrower file
    (the same writer, chat template included) keeps it quick."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "python"))
    os.environ.setdefault("CACTUS_LIBRARY", os.path.join(BUILD_DIR, "lib", "libcactus.so"))
    import cactus

    path = str(tmp_path / "lfm2-small.gguf")
    write_lfm2(path, seed=9, dims=SMALL)
    options = {"max_tokens": 8, "temperature": 0, "ignore_eos": True}
    turn1 = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    reused = cactus.cactus_init(path)
    fresh = cactus.cactus_init(path)
    try:
        first = cactus.cactus_complete(reused, turn1, options)
        turn2 = turn1 + [{"role": "assistant", "content": first["response"]},
                         {"role": "user", "content": "And then?"}]
        second = cactus.cactus_complete(reused, turn2, options)
        alone = cactus.cactus_complete(fresh, turn2, options)
    finally:
        cactus.cactus_destroy(reused)
        cactus.cactus_destroy(fresh)
    print(f"\nturn 2: prompt {second['prompt_tokens']} tokens, prefilled {second['prefill_tokens']} "
          f"(fresh: {alone['prefill_tokens']})")
    assert second["prefill_tokens"] < second["prompt_tokens"]  # the first turn's cache was reused
    assert alone["prefill_tokens"] == alone["prompt_tokens"]
    assert second["response"] == alone["response"]
