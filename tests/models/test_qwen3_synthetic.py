"""Qwen3 (qk-norm) on synthetic weights: gguf-py writes a random-weight qwen3 GGUF (head_dim set
apart from n_embd / n_head, GQA, tied output), llama.cpp (llama-cpp-python) and our forward pass
(bin/model_probe, teacher forcing) score the same 48 tokens, and every row's log-probabilities must
agree (both sides keep the KV cache in f16, as by default). A second file with an output head of
its own and qk-norm weights far from 1 checks those paths too. (llama.cpp's qwen3 graph is known
to agree with transformers to 1e-5 on such files; see docs/MODELS.md.)"""
import json
import os
import subprocess

import numpy as np
import pytest

from synthetic_vocab import byte_vocab

gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "model_probe")


def write_qwen3(path, seed, tied=True, norm_spread=0.1):
    rng = np.random.default_rng(seed)
    tokens, types, merges = byte_vocab()
    n_vocab, n_embd, n_head, n_kv, head_dim, n_ff, n_layer = len(tokens), 96, 4, 2, 48, 192, 3
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_context_length(512)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(n_vocab - 2)
    w.add_add_bos_token(False)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1.0 + norm_spread * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", rng.standard_normal((n_vocab, n_embd)).astype(np.float32))
    if not tied:
        w.add_tensor("output.weight", mat(n_vocab, n_embd))
    w.add_tensor("output_norm.weight", norm(n_embd))
    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(n_embd))
        w.add_tensor(p + "attn_q.weight", mat(n_head * head_dim, n_embd))
        w.add_tensor(p + "attn_k.weight", mat(n_kv * head_dim, n_embd))
        w.add_tensor(p + "attn_v.weight", mat(n_kv * head_dim, n_embd))
        w.add_tensor(p + "attn_q_norm.weight", norm(head_dim))
        w.add_tensor(p + "attn_k_norm.weight", norm(head_dim))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_head * head_dim))
        w.add_tensor(p + "ffn_norm.weight", norm(n_embd))
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n_vocab


def log_softmax(row):
    row = np.asarray(row, dtype=np.float64)
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


@pytest.mark.parametrize("tied,spread", [(True, 0.1), (False, 0.8)])
def test_qwen3_matches_llama_cpp(tmp_path, tied, spread):
    path = str(tmp_path / "qwen3.gguf")
    n_vocab = write_qwen3(path, seed=3 if tied else 4, tied=tied, norm_spread=spread)
    rng = np.random.default_rng(5)
    tokens = [int(t) for t in rng.integers(0, n_vocab - 2, size=48)]

    llm = llama_cpp.Llama(model_path=path, n_ctx=256, logits_all=True, n_threads=2, verbose=False)
    llm.eval(tokens)
    theirs = [log_softmax(llm.scores[i]) for i in range(len(tokens))]

    assert os.path.exists(PROBE), PROBE
    request = {"tokens": tokens, "score_from": 1, "score_ids": [list(range(n_vocab))] * (len(tokens) - 1)}
    run = subprocess.run([PROBE, path, "--threads", "2", "--ctx", "256"], input=json.dumps(request) + "\n",
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    reply = json.loads(run.stdout.splitlines()[0])
    assert "error" not in reply, reply
    ours = reply["score_logprobs"]  # rows predicting tokens 1..47, i.e. llama rows 0..46
    worst = max(float(np.max(np.abs(np.asarray(o) - t))) for o, t in zip(ours, theirs))
    agree = sum(int(np.argmax(o)) == int(np.argmax(t)) for o, t in zip(ours, theirs))
    print(f"\nqwen3 synthetic (tied={tied}): max |dlogp| {worst:.2e}, argmax agree {agree}/{len(ours)}")
    assert worst < 2e-2
    assert agree >= len(ours) - 1
