"""Named intermediates of bin/model_probe and the distances used to compare them with a reference
(numpy and the standard library only: tests/models/test_gemma4_oracle.py in CI, and
scripts/check_transformers.py by hand).

The probe's dump request (tests/tools/model_probe.cpp):
  model_probe MODEL.gguf --kv-type f16|int8|f32
  {"tokens": [...], "dump": ["layer_out", ...], "dump_to": "/abs/dir"}
      -> {"dumped": {"layer_out": [n_layer, T, W], "logits": [T, n_vocab], ...}}
teacher-forces the tokens (logits for every position) and writes each name as float32 <name>.npy in
dump_to. A name the architecture does not produce is absent from "dumped".

Names: global [T, W]: embd (token embeddings after the embedding scale), per_layer_inputs (Gemma 4's
PLE inputs after projection, norm and combination, [T, n_layer * P]), result_norm (after the final
norm), logits (after the final softcap); per layer [n_layer, T, W]: attn_out (what the attention or
mixing block adds to the residual, after its post-norm when the family has one), ffn_out (what the FFN
adds, likewise), ple_out (what Gemma 4's per-layer-embedding block adds, after its post-norm),
layer_out (the residual stream at the end of the layer, after Gemma 4's layer_scalar)."""
import json
import os
import subprocess

import numpy as np

GLOBAL_NAMES = ("embd", "per_layer_inputs", "result_norm", "logits")
LAYER_NAMES = ("attn_out", "ffn_out", "ple_out", "layer_out")
ALL_NAMES = ("embd", "per_layer_inputs", "attn_out", "ffn_out", "ple_out", "layer_out", "result_norm", "logits")


class ProbeError(RuntimeError):
    pass


def log_softmax(rows):
    """Row-wise log-probabilities in float64; rows [T, n_vocab]."""
    rows = np.asarray(rows, dtype=np.float64)
    m = rows.max(axis=-1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=-1, keepdims=True))


def max_dlogp(ours_logits, ref_logits):
    """[T]: max over the whole vocabulary of |log p_ours - log p_ref| at each position."""
    return np.max(np.abs(log_softmax(ours_logits) - log_softmax(ref_logits)), axis=-1)


def mean_dlogp(ours_logits, ref_logits):
    """Mean of |log p_ours - log p_ref| over every position and the whole vocabulary."""
    return float(np.mean(np.abs(log_softmax(ours_logits) - log_softmax(ref_logits))))


def rel_err(ours, ref):
    """||a - b|| / ||b||: per layer ([n_layer] for [n_layer, T, W] arrays), or one number for [T, W]."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if ours.shape != ref.shape:
        raise ValueError(f"rel_err: shapes differ: ours {ours.shape}, reference {ref.shape}")
    axes = tuple(range(1, ref.ndim)) if ref.ndim == 3 else None
    num = np.sqrt(np.sum((ours - ref) ** 2, axis=axes))
    den = np.sqrt(np.sum(ref ** 2, axis=axes))
    return num / np.maximum(den, 1e-30)


def probe_args(probe, gguf_path, kv_type=None, threads=2, ctx=256):
    args = [probe, gguf_path, "--threads", str(threads), "--ctx", str(ctx)]
    if kv_type:
        args += ["--kv-type", kv_type]
    return args


def ask_probe(args, requests, timeout=600):
    """Runs model_probe once with one request per line; returns the replies. A failed start (bad file,
    unknown architecture, unknown flag) or an error reply raises ProbeError with the probe's message."""
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    run = subprocess.run(args, input=lines, capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise ProbeError(f"model_probe exited {run.returncode}: {run.stderr.strip()}")
    replies = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    if len(replies) != len(requests):
        raise ProbeError(f"model_probe answered {len(replies)} of {len(requests)} requests: {run.stderr.strip()}")
    for reply in replies:
        if "error" in reply:
            raise ProbeError("model_probe: " + reply["error"])
    return replies


def load_failure(probe, gguf_path):
    """None when the probe loads the file (no request sent), else its error message."""
    run = subprocess.run([probe, gguf_path, "--threads", "1", "--ctx", "64"], input="", capture_output=True,
                         text=True, timeout=300)
    return None if run.returncode == 0 else run.stderr.strip() or f"exit status {run.returncode}"


def supports_flag(probe, gguf_path, flag, value):
    """Whether this model_probe knows a command-line flag (it rejects unknown ones with status 2)."""
    run = subprocess.run([probe, gguf_path, "--threads", "1", "--ctx", "64", flag, value], input="",
                         capture_output=True, text=True, timeout=300)
    return not (run.returncode == 2 and "unknown argument" in run.stderr)


def dump(probe, gguf_path, prompts, names, out_dir, kv_type="f32", threads=2, ctx=256):
    """Teacher-forced named intermediates of each prompt: a list of {name: float32 array}, one per prompt
    (each prompt dumps into its own folder under out_dir)."""
    requests, dirs = [], []
    for k, tokens in enumerate(prompts):
        d = os.path.abspath(os.path.join(out_dir, f"dump{k}"))
        os.makedirs(d, exist_ok=True)
        dirs.append(d)
        requests.append({"tokens": [int(t) for t in tokens], "dump": list(names), "dump_to": d})
    replies = ask_probe(probe_args(probe, gguf_path, kv_type, threads, ctx), requests)
    out = []
    for d, reply in zip(dirs, replies):
        if "dumped" not in reply:
            raise ProbeError(f"model_probe ignored the dump request (reply keys {sorted(reply)})")
        arrays = {}
        for name, shape in reply["dumped"].items():
            a = np.load(os.path.join(d, name + ".npy"))
            if list(a.shape) != list(shape):
                raise ProbeError(f"model_probe: {name}.npy has shape {list(a.shape)}, the reply says {shape}")
            arrays[name] = a
        out.append(arrays)
    return out


def decode_logprobs(probe, gguf_path, prompt, cont, n_vocab, chunk, kv_type=None, threads=2, ctx=256):
    """[len(cont), n_vocab] log-probabilities from the single-token decode path: the prompt prefilled
    `chunk` tokens per call, then cont fed one token at a time (row i predicts cont[i])."""
    request = {"tokens": [int(t) for t in prompt], "chunk": int(chunk), "decode_ids": [int(t) for t in cont],
               "score_ids": [list(range(n_vocab))] * len(cont)}
    reply = ask_probe(probe_args(probe, gguf_path, kv_type, threads, ctx), [request])[0]
    return np.asarray(reply["decode_logprobs"], dtype=np.float64)


def score_logprobs(probe, gguf_path, tokens, n_vocab, kv_type=None, threads=2, ctx=256):
    """[len(tokens) - 1, n_vocab] teacher-forced log-probabilities (rows predicting tokens 1..T-1), for
    probes without the dump request."""
    request = {"tokens": [int(t) for t in tokens], "score_from": 1,
               "score_ids": [list(range(n_vocab))] * (len(tokens) - 1)}
    reply = ask_probe(probe_args(probe, gguf_path, kv_type, threads, ctx), [request])[0]
    return np.asarray(reply["score_logprobs"], dtype=np.float64)


def layer_table(errors, names):
    """Text table of per-layer relative errors: errors[name] is an [n_layer] array."""
    present = [n for n in names if n in errors]
    n_layer = max(len(errors[n]) for n in present)
    lines = ["layer " + "".join(f"{n:>12}" for n in present)]
    for il in range(n_layer):
        cells = "".join(f"{errors[n][il]:12.2e}" if il < len(errors[n]) else f"{'-':>12}" for n in present)
        lines.append(f"{il:5d} " + cells)
    return "\n".join(lines)


def llama_cpp_logits(gguf_path, prompts, kv_type="f16", threads=2, n_ctx=256):
    """llama.cpp's (llama-cpp-python's) teacher-forced logits [T, n_vocab] of each prompt, the KV cache
    kept in kv_type ("f16": its default, or "f32")."""
    import llama_cpp

    ggml_type = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32}[kv_type]
    llm = llama_cpp.Llama(model_path=gguf_path, n_ctx=n_ctx, n_batch=n_ctx, logits_all=True, n_threads=threads,
                          type_k=ggml_type, type_v=ggml_type, verbose=False)
    out = []
    for tokens in prompts:
        llm.reset()
        llm.eval([int(t) for t in tokens])
        out.append(np.array(llm.scores[:len(tokens)], dtype=np.float32))
    return out
