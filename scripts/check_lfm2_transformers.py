"""One-off cross-check of the lfm2 architecture against Hugging Face transformers (outside CI:
transformers needs torch, ~5.6 GB from PyPI with its CUDA packages).

Chain: a random-init Lfm2ForCausalLM built from a small config (conv layers and GQA attention
layers mixed as in LFM2-350M, norm weights far from 1, conv taps of unit scale, tied and untied
output) -> llama.cpp's own converter (convert_hf_to_gguf.py from the llama-cpp-python 0.3.36 sdist,
f32) -> our forward pass (bin/model_probe, f16 KV cache as by default), both teacher-forced in one
call and through the single-token decode path after a prompt prefilled in chunks of 5 (the conv
state carried across calls). Every row's log-probabilities over the whole vocabulary are compared
with transformers' (float32, eager attention); llama.cpp's rows on the same file are shown too.

  scripts/check_lfm2_transformers.sh      (makes ~/.cache/cactus/torch-venv, then runs this)

The vocabulary is the small byte-level one of tests/models/lfm2_synthetic.py (the converter's
set_vocab is replaced; the tokenizer is not what is checked)."""
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
sys.path.insert(0, os.path.join(REPO, "scripts"))
from check_qwen3_transformers import compare, llama_cpp_rows, log_softmax, ours  # noqa: E402
from lfm2_synthetic import lfm2_vocab  # noqa: E402


def random_lfm2(n_vocab, tied, seed):
    from transformers import Lfm2Config, Lfm2ForCausalLM

    torch.manual_seed(seed)
    config = Lfm2Config(vocab_size=n_vocab, hidden_size=256, intermediate_size=1024, num_hidden_layers=6,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                        norm_eps=1e-5, tie_word_embeddings=tied, conv_L_cache=3, full_attn_idxs=[2, 5],
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                        block_auto_adjust_ff_dim=True, block_multiple_of=256, block_ffn_dim_multiplier=1.0)
    config._attn_implementation = "eager"
    model = Lfm2ForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.5 * torch.randn_like(p))
            elif "conv.weight" in name and p.dim() == 3:  # [n_embd, 1, L] depthwise taps
                p.copy_(0.6 * torch.randn_like(p))
            elif p.dim() == 2:
                fan_in = p.shape[1] if "embed_tokens" not in name else 1
                scale = 3.0 if name == "lm_head.weight" else 1.0
                p.copy_(scale * torch.randn_like(p) / np.sqrt(fan_in))
    return model


def convert(hf_dir, out_path, sdist):
    """Runs llama.cpp's convert_hf_to_gguf.py (and its own gguf-py) on hf_dir, vocabulary swapped."""
    llama_dir = os.path.join(sdist, "vendor", "llama.cpp")
    sys.path.insert(0, os.path.join(llama_dir, "gguf-py"))
    sys.path.insert(0, llama_dir)
    import convert_hf_to_gguf as conv

    tokens, types, merges = lfm2_vocab()

    def set_vocab(self):
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre("lfm2")
        self.gguf_writer.add_token_list(tokens)
        self.gguf_writer.add_token_types(types)
        self.gguf_writer.add_token_merges(merges)
        self.gguf_writer.add_eos_token_id(tokens.index("<|im_end|>"))
        self.gguf_writer.add_add_bos_token(False)

    try:  # newer converters load architecture modules lazily (conversion/)
        from conversion import get_model_class

        cls = get_model_class("Lfm2ForCausalLM")
    except ImportError:
        base = getattr(conv, "ModelBase", None) or getattr(conv, "Model")
        cls = base.from_model_architecture("Lfm2ForCausalLM")
    cls.set_vocab = set_vocab
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", hf_dir, "--outfile", out_path, "--outtype", "f32"]
    try:
        conv.main()
    finally:
        sys.argv = argv


def ours_decode(probe, path, prompt, cont, n_vocab, chunk):
    """Our rows predicting cont[0..] from the single-token decode path (prompt prefilled in chunks)."""
    request = {"tokens": prompt, "chunk": chunk, "decode_ids": cont, "score_ids": [list(range(n_vocab))] * len(cont)}
    run = subprocess.run([probe, path, "--threads", "2", "--ctx", "256"], input=json.dumps(request) + "\n",
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        sys.exit("model_probe failed: " + run.stderr)
    reply = json.loads(run.stdout.splitlines()[0])
    if "error" in reply:
        sys.exit("model_probe: " + reply["error"])
    return np.asarray(reply["decode_logprobs"], dtype=np.float64)


def kl_max(rows, theirs):
    p = np.exp(theirs)
    return float(np.max(np.sum(p * (theirs - rows), axis=1)))


def check(tied, seed, sdist, probe, workdir, llama_python):
    n_vocab = len(lfm2_vocab()[0])
    model = random_lfm2(n_vocab, tied, seed)
    hf_dir = os.path.join(workdir, f"lfm2-tied{int(tied)}")
    model.save_pretrained(hf_dir, safe_serialization=True)
    gguf_path = hf_dir + ".gguf"
    convert(hf_dir, gguf_path, sdist)

    rng = np.random.default_rng(seed + 100)
    tokens = [int(t) for t in rng.integers(0, n_vocab - 4, size=48)]
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0].double().numpy()
    theirs = log_softmax(logits)[:-1]  # row i predicts token i + 1
    print(f"lfm2 tied={tied}:")
    rows = ours(probe, gguf_path, tokens, n_vocab)
    worst, agree = compare("cactus   ", rows, theirs)
    print(f"  cactus    KL(transformers || cactus) max {kl_max(rows, theirs):.2e}")
    split = 20  # prompt tokens[:20] in chunks of 5, then tokens[20:] one at a time
    dec = ours_decode(probe, gguf_path, tokens[:split], tokens[split:], n_vocab, 5)
    worst_dec, agree_dec = compare("cactus decode path", dec, theirs[split - 1:])
    if llama_python:
        compare("llama.cpp", llama_cpp_rows(llama_python, gguf_path, tokens), theirs)
    n = len(theirs)
    return max(worst, worst_dec), min(agree - (n - 1), agree_dec - (len(dec) - 1)) >= 0


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
            worst, agree_ok = check(tied, seed, args.sdist, probe, workdir, llama)
            ok = ok and worst < args.tolerance and agree_ok
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
