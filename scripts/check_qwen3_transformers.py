"""One-off cross-check of the qwen3 architecture against Hugging Face transformers (outside CI:
transformers needs torch, ~5.6 GB from PyPI with its CUDA packages).

Chain: a random-init Qwen3ForCausalLM built from a small config (head_dim apart from
hidden/heads, GQA, qk-norm weights far from 1, tied and untied output) -> llama.cpp's own
converter (convert_hf_to_gguf.py from the llama-cpp-python 0.3.36 sdist, f32) -> our forward pass
(bin/model_probe, teacher forcing, f16 KV cache as by default). Every row's log-probabilities over
the whole vocabulary are compared with transformers' (float32, eager attention).

  scripts/check_qwen3_transformers.sh      (makes ~/.cache/cactus/torch-venv, then runs this)

The converter needs a tokenizer in the model folder; the model's vocabulary here is the GPT-2 byte
alphabet of tests/models/test_qwen3_synthetic.py, so the converter's set_vocab is replaced by one
that writes that vocabulary (the tokenizer is not what is checked)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
from synthetic_vocab import byte_vocab  # noqa: E402


def random_qwen3(n_vocab, tied, seed):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=n_vocab, hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=96, max_position_embeddings=512,
                         rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=tied,
                         attn_implementation="eager", torch_dtype="float32")
    model = Qwen3ForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.5 * torch.randn_like(p))
            elif p.dim() == 2:
                fan_in = p.shape[1] if "embed_tokens" not in name else 1
                p.copy_(torch.randn_like(p) / np.sqrt(fan_in))
    return model


def convert(hf_dir, out_path, sdist):
    """Runs llama.cpp's convert_hf_to_gguf.py (and its own gguf-py) on hf_dir, vocabulary swapped."""
    llama_dir = os.path.join(sdist, "vendor", "llama.cpp")
    sys.path.insert(0, os.path.join(llama_dir, "gguf-py"))
    sys.path.insert(0, llama_dir)
    import convert_hf_to_gguf as conv

    tokens, types, merges = byte_vocab()

    def set_vocab(self):
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre("qwen2")
        self.gguf_writer.add_token_list(tokens)
        self.gguf_writer.add_token_types(types)
        self.gguf_writer.add_token_merges(merges)
        self.gguf_writer.add_eos_token_id(len(tokens) - 2)
        self.gguf_writer.add_add_bos_token(False)

    try:  # newer converters load architecture modules lazily (conversion/)
        from conversion import get_model_class

        cls = get_model_class("Qwen3ForCausalLM")
    except ImportError:
        base = getattr(conv, "ModelBase", None) or getattr(conv, "Model")
        cls = base.from_model_architecture("Qwen3ForCausalLM")
    cls.set_vocab = set_vocab
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", hf_dir, "--outfile", out_path, "--outtype", "f32"]
    try:
        conv.main()
    finally:
        sys.argv = argv


def log_softmax(rows):
    rows = np.asarray(rows, dtype=np.float64)
    m = rows.max(axis=-1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=-1, keepdims=True))


def ours(probe, path, tokens, n_vocab):
    request = {"tokens": tokens, "score_from": 1, "score_ids": [list(range(n_vocab))] * (len(tokens) - 1)}
    run = subprocess.run([probe, path, "--threads", "2", "--ctx", "256"], input=json.dumps(request) + "\n",
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        sys.exit("model_probe failed: " + run.stderr)
    reply = json.loads(run.stdout.splitlines()[0])
    if "error" in reply:
        sys.exit("model_probe: " + reply["error"])
    return np.asarray(reply["score_logprobs"], dtype=np.float64)  # rows predicting tokens 1..n-1


LLAMA_SCORER = """
import json, sys
import numpy as np
import llama_cpp
path, tokens = sys.argv[1], json.loads(sys.argv[2])
llm = llama_cpp.Llama(model_path=path, n_ctx=256, logits_all=True, n_threads=2, verbose=False)
llm.eval(tokens)
print(json.dumps([list(map(float, llm.scores[i])) for i in range(len(tokens) - 1)]))
"""


def llama_cpp_rows(python, path, tokens):
    """llama.cpp's rows on the same file (f16 KV cache, as ours), run by the oracle venv's python."""
    run = subprocess.run([python, "-c", LLAMA_SCORER, path, json.dumps(tokens)], capture_output=True, text=True,
                         timeout=600)
    if run.returncode != 0:
        sys.exit("llama.cpp scorer failed: " + run.stderr[-2000:])
    return log_softmax(json.loads(run.stdout))


def compare(name, rows, theirs):
    worst = float(np.max(np.abs(rows - theirs)))
    mean = float(np.mean(np.abs(rows - theirs)))
    agree = int(np.sum(np.argmax(rows, axis=1) == np.argmax(theirs, axis=1)))
    print(f"  {name} vs transformers: max |dlogp| {worst:.2e}, mean |dlogp| {mean:.2e}, "
          f"argmax agree {agree}/{len(theirs)}")
    return worst, agree


def check(tied, seed, sdist, probe, workdir, llama_python):
    tokens_vocab = byte_vocab()[0]
    n_vocab = len(tokens_vocab)
    model = random_qwen3(n_vocab, tied, seed)
    hf_dir = os.path.join(workdir, f"qwen3-tied{int(tied)}")
    model.save_pretrained(hf_dir, safe_serialization=True)
    gguf_path = hf_dir + ".gguf"
    convert(hf_dir, gguf_path, sdist)

    rng = np.random.default_rng(seed + 100)
    tokens = [int(t) for t in rng.integers(0, n_vocab - 2, size=48)]
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0].double().numpy()
    theirs = log_softmax(logits)[:-1]  # row i predicts token i + 1
    print(f"qwen3 tied={tied}:")
    worst, agree = compare("cactus   ", ours(probe, gguf_path, tokens, n_vocab), theirs)
    if llama_python:
        compare("llama.cpp", llama_cpp_rows(llama_python, gguf_path, tokens), theirs)
    return worst, agree, len(theirs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdist", required=True, help="unpacked llama_cpp_python-0.3.36 sdist")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--tolerance", type=float, default=5e-2, help="max |dlogp| allowed (f16 KV cache)")
    ap.add_argument("--llama-python", default=os.path.expanduser("~/.cache/cactus/oracle/venv/bin/python"),
                    help="a python with llama_cpp, to score the same file with llama.cpp ('' = skip)")
    args = ap.parse_args()
    probe = os.path.join(args.build, "bin", "model_probe")
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        for tied, seed in ((True, 3), (False, 4)):
            llama = args.llama_python if args.llama_python and os.path.exists(args.llama_python) else None
            worst, agree, n = check(tied, seed, args.sdist, probe, workdir, llama)
            ok = ok and worst < args.tolerance and agree >= n - 1
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
