"""The tiny faithful Gemma 4 text model (research/GEMMA4.md §7.1), with every weight generated from a
seed by numpy alone, and written to GGUF exactly as llama.cpp's converter writes it.

One definition serves two places:
  - scripts/check_transformers.py --family gemma4 (torch venv, by hand) loads hf_tensors() into
    transformers' Gemma4ForCausalLM, converts that model with llama.cpp's own convert_hf_to_gguf.py,
    checks that the converter's file and write_gguf()'s hold the same tensors (bit-equal) and the same
    metadata, and writes the goldens tests/models/data/gemma4_tiny_golden.npz;
  - tests/models/test_gemma4_oracle.py (CI, no torch) rebuilds the same file with write_gguf() and
    compares our forward pass with those goldens.

The configuration keeps every structural feature of E2B at small widths: the [s,s,s,s,f] layer pattern
with a full last layer, head_dim 32 for sliding and 64 for full layers (proportional RoPE rotating
64 * 0.25 = 16 dims, so rope_freqs holds 8 ones then 24 × 1e30), KV sharing from layer 5 (sources 3 and
4: the map llama.cpp hard-codes), double-wide MLPs in the shared layers, per-layer embeddings of 16,
a window of 8 (prompts run past it) and the final softcap 30 set explicitly (transformers' default is
None, llama.cpp's 30).

Weights: each tensor comes from its own stream, numpy PCG64 seeded with (seed, crc32(HF name)), so
any tensor can be regenerated alone. Scales keep every path visible: 1-D gains drawn away from 1,
layer_scalar in [0.5, 1.5] (unit values would leave those multiplications untested), q/k norm gains
below 1 so attention scores (scale 1.0, no 1/sqrt(d)) spread over a few units instead of picking one
key, and embeddings of std 0.2 so logits reach ±13 (std 2.4), where the softcap moves a logit by
up to 0.7, and the next-token distributions range from flat (top p 0.13) to peaked (0.99)."""
import hashlib
import zlib

import numpy as np

SEED = 20261206

# transformers.Gemma4TextConfig keyword arguments (global_head_dim is popped by its __post_init__).
CONFIG = dict(
    vocab_size=512, vocab_size_per_layer_input=512, hidden_size=128, intermediate_size=256,
    num_hidden_layers=10, layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 2,
    num_attention_heads=4, num_key_value_heads=1, head_dim=32, global_head_dim=64,
    num_kv_shared_layers=5, use_double_wide_mlp=True, hidden_size_per_layer_input=16, sliding_window=8,
    final_logit_softcapping=30.0, attention_k_eq_v=False, tie_word_embeddings=True, rms_norm_eps=1e-6,
    initializer_range=0.05, max_position_embeddings=4096, pad_token_id=0, eos_token_id=1, bos_token_id=2,
    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                     "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1000000.0}})

PROMPT_LENGTHS = (12, 24, 40)  # all past the window of 8; 40 wraps a sliding ring five times

# HF name -> GGUF name, as gguf-py's TensorNameMap maps them for MODEL_ARCH.GEMMA4 (research/GEMMA4.md §2.2).
GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
    "model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
    "model.per_layer_projection_norm.weight": "per_layer_proj_norm.weight",
    "model.norm.weight": "output_norm.weight",
}
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "layer_scalar": "layer_output_scale.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "per_layer_input_gate.weight": "inp_gate.weight",
    "per_layer_projection.weight": "proj.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "post_per_layer_input_norm.weight": "post_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
}


def first_shared_layer(config=CONFIG):
    return config["num_hidden_layers"] - config["num_kv_shared_layers"]


def is_sliding(config=CONFIG):
    return [t == "sliding_attention" for t in config["layer_types"]]


def layer_shapes(il, config=CONFIG):
    """HF suffix -> shape of layer il's tensors ([out, in] for linears, as torch stores them)."""
    h, p = config["hidden_size"], config["hidden_size_per_layer_input"]
    d = config["head_dim"] if is_sliding(config)[il] else config["global_head_dim"]
    shared = il >= first_shared_layer(config)
    ff = config["intermediate_size"] * (2 if shared and config["use_double_wide_mlp"] else 1)
    shapes = {
        "input_layernorm.weight": (h,), "layer_scalar": (1,),
        "mlp.down_proj.weight": (h, ff), "mlp.gate_proj.weight": (ff, h), "mlp.up_proj.weight": (ff, h),
        "per_layer_input_gate.weight": (p, h), "per_layer_projection.weight": (h, p),
        "post_attention_layernorm.weight": (h,), "post_feedforward_layernorm.weight": (h,),
        "post_per_layer_input_norm.weight": (h,), "pre_feedforward_layernorm.weight": (h,),
        "self_attn.o_proj.weight": (h, config["num_attention_heads"] * d), "self_attn.q_norm.weight": (d,),
        "self_attn.q_proj.weight": (config["num_attention_heads"] * d, h),
    }
    if not shared:  # KV consumers have no k/v projections or k norm (transformers neither makes nor saves them)
        kv = config["num_key_value_heads"] * d
        shapes.update({"self_attn.k_norm.weight": (d,), "self_attn.k_proj.weight": (kv, h),
                       "self_attn.v_proj.weight": (kv, h)})
    return shapes


def hf_shapes(config=CONFIG):
    """Every tensor transformers saves for Gemma4ForCausalLM (tied head: no lm_head), sorted by name."""
    h, p, n_layer = config["hidden_size"], config["hidden_size_per_layer_input"], config["num_hidden_layers"]
    shapes = {
        "model.embed_tokens.weight": (config["vocab_size"], h),
        "model.embed_tokens_per_layer.weight": (config["vocab_size_per_layer_input"], n_layer * p),
        "model.per_layer_model_projection.weight": (n_layer * p, h),
        "model.per_layer_projection_norm.weight": (p,),
        "model.norm.weight": (h,),
    }
    for il in range(n_layer):
        for suffix, shape in layer_shapes(il, config).items():
            shapes[f"model.layers.{il}.{suffix}"] = shape
    return dict(sorted(shapes.items()))


def _draw(name, shape, rng):
    """One tensor's values; the scale depends on the tensor's role (module docstring)."""
    if name.endswith("layer_scalar"):
        return rng.uniform(0.5, 1.5, shape)
    if name.endswith(("q_norm.weight", "k_norm.weight")):
        return rng.uniform(0.4, 0.9, shape)
    if len(shape) == 1:  # the other RMSNorm gains, used as they are (no 1 + w in Gemma 4)
        return rng.uniform(0.6, 1.4, shape)
    if name == "model.embed_tokens.weight":  # x0 = E * sqrt(128): rms ~2.3; tied logits std ~2.3
        return 0.2 * rng.standard_normal(shape)
    if name == "model.embed_tokens_per_layer.weight":  # scaled by sqrt(16) in the model: rms ~1
        return 0.25 * rng.standard_normal(shape)
    return rng.standard_normal(shape) / np.sqrt(shape[1])  # linears: unit gain from input to output


def hf_tensors(seed=SEED, config=CONFIG):
    """HF name -> float32 array, in sorted name order."""
    out = {}
    for name, shape in hf_shapes(config).items():
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        out[name] = _draw(name, shape, rng).astype(np.float32)
    return out


def weights_digest(tensors):
    """sha256 over names, shapes and bytes: the goldens record it, the CI test recomputes it."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        h.update(name.encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


def gguf_name(hf_name):
    if hf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf_name]
    _, _, il, suffix = hf_name.split(".", 3)  # model.layers.N.suffix
    return f"blk.{il}.{LAYER_NAMES[suffix]}"


def rope_freqs(config=CONFIG):
    """Proportional RoPE through NeoX freq_factors: the first global_head_dim * factor / 2 pairs rotate
    (factor 1), the rest get 1e30 (angle ~0), as conversion/gemma.py generate_extra_tensors does."""
    d = config["global_head_dim"]
    n_rot = int(d * config["rope_parameters"]["full_attention"]["partial_rotary_factor"] / 2)
    return np.array([1.0] * n_rot + [1e30] * (d // 2 - n_rot), dtype=np.float32)


def gguf_tensors(tensors, config=CONFIG):
    """(GGUF name, array) in the converter's order: rope_freqs, then the HF tensors sorted by HF name."""
    out = [("rope_freqs.weight", rope_freqs(config))]
    for hf_name in sorted(tensors):
        out.append((gguf_name(hf_name), tensors[hf_name]))
    return out


def vocab(n_vocab=CONFIG["vocab_size"]):
    """A small SentencePiece-style vocabulary: <pad> <eos> <bos> <unk>, the 256 byte tokens, then
    '▁'-prefixed pieces. Only ids matter to the tests; the tokenizer is not what is checked."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [3, 3, 3, 2] + [6] * 256  # CONTROL, UNKNOWN, BYTE
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(tokens) < n_vocab:
        tokens.append("\u2581" + letters[i // 26 % 26] + letters[i % 26])
        types.append(1)  # NORMAL
        i += 1
    scores = [0.0] * 4 + [0.0] * 256 + [-float(k) for k in range(n_vocab - 260)]
    return tokens, scores, types


def write_vocab(writer, config=CONFIG):
    """The tokenizer keys, the same in our file and in the converter's (its set_vocab is replaced by this)."""
    tokens, scores, types = vocab(config["vocab_size"])
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_pad_token_id(config["pad_token_id"])
    writer.add_unk_token_id(3)
    writer.add_add_bos_token(True)
    writer.add_add_space_prefix(False)


def metadata(config=CONFIG):
    """(key, value, kind) for every gemma4.* key llama.cpp's converter writes for this config (read from
    its output once: Gemma3Model/Gemma4Model.set_gguf_parameters, with its later keys winning)."""
    n_layer = config["num_hidden_layers"]
    ff = config["intermediate_size"]
    first_shared = first_shared_layer(config)
    rope = config["rope_parameters"]
    a = "gemma4."
    return [
        (a + "block_count", n_layer, "u32"),
        (a + "context_length", config["max_position_embeddings"], "u32"),
        (a + "embedding_length", config["hidden_size"], "u32"),
        (a + "feed_forward_length",
         [ff * (2 if config["use_double_wide_mlp"] and il >= first_shared else 1) for il in range(n_layer)], "i32[]"),
        (a + "attention.head_count", config["num_attention_heads"], "u32"),
        (a + "attention.head_count_kv", config["num_key_value_heads"], "u32"),
        (a + "rope.freq_base", rope["full_attention"]["rope_theta"], "f32"),
        (a + "rope.freq_base_swa", rope["sliding_attention"]["rope_theta"], "f32"),
        (a + "attention.layer_norm_rms_epsilon", config["rms_norm_eps"], "f32"),
        (a + "attention.key_length", config["global_head_dim"], "u32"),
        (a + "attention.value_length", config["global_head_dim"], "u32"),
        (a + "final_logit_softcapping", config["final_logit_softcapping"], "f32"),
        (a + "attention.sliding_window", config["sliding_window"], "u32"),
        (a + "attention.shared_kv_layers", config["num_kv_shared_layers"], "u32"),
        (a + "embedding_length_per_layer_input", config["hidden_size_per_layer_input"], "u32"),
        (a + "attention.sliding_window_pattern", is_sliding(config), "bool[]"),
        (a + "attention.key_length_swa", config["head_dim"], "u32"),
        (a + "attention.value_length_swa", config["head_dim"], "u32"),
        (a + "rope.dimension_count", config["global_head_dim"], "u32"),  # proportional: all dims, rope_freqs masks
        (a + "rope.dimension_count_swa", config["head_dim"], "u32"),
    ]


def _add(writer, key, value, kind):
    import gguf

    if kind == "u32":
        writer.add_uint32(key, int(value))
    elif kind == "f32":
        writer.add_float32(key, float(value))
    elif kind == "i32[]":
        writer.add_key_value(key, [int(v) for v in value], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    elif kind == "bool[]":
        writer.add_key_value(key, [bool(v) for v in value], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)
    else:
        raise ValueError(f"gemma4_tiny: unknown metadata kind {kind!r} for {key}")


def write_gguf(path, seed=SEED, config=CONFIG):
    """Writes the f32 GGUF; returns the HF tensors it was made from."""
    import gguf

    tensors = hf_tensors(seed, config)
    writer = gguf.GGUFWriter(path, "gemma4")
    writer.add_type("model")
    writer.add_name("gemma4 tiny (tests/models/gemma4_tiny.py)")
    for key, value, kind in metadata(config):
        _add(writer, key, value, kind)
    writer.add_file_type(0)  # ALL_F32
    writer.add_quantization_version(2)
    write_vocab(writer, config)
    for name, array in gguf_tensors(tensors, config):
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


def prompts(seed=SEED, config=CONFIG):
    """Token ids of the golden prompts: <bos>, then ids drawn from the ordinary tokens."""
    out = []
    for k, n in enumerate(PROMPT_LENGTHS):
        rng = np.random.default_rng([seed, 1000 + k])
        out.append([config["bos_token_id"]] + [int(t) for t in rng.integers(4, config["vocab_size"], n - 1)])
    return out


def kl(ref_logits, logits):
    """KL(softmax(ref_logits) || softmax(logits)) of one position's logits [n_vocab], in nats."""
    p = np.exp(ref_logits - ref_logits.max())
    p /= p.sum()
    lq = logits - logits.max()
    lq -= np.log(np.exp(lq).sum())
    return float((p * (np.log(p) - lq)).sum())
