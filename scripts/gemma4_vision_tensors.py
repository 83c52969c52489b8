"""The Gemma 4 vision tower's tensors for scripts/make_gemma4_mmproj.py: names, shapes and GGUF keys
exactly as llama.cpp's converter writes them (conversion/gemma.py Gemma4VisionAudioModel on top of
MmprojModel.set_gguf_parameters; names from gguf-py's TensorNameMap for MODEL_ARCH.MMPROJ), with
numpy-seeded values, and the inverse mapping to transformers' names (Gemma4ForConditionalGeneration).

Shapes:
  - "e2b": the real E2B/E4B tower (Gemma4VisionConfig defaults with use_clipped_linears): 16 layers of
    768, 12 heads of 64, GeGLU 3072, position tables [2, 10240, 768].
  - "tiny": the same structure at CI size: 3 layers of 64, 4 heads of 16, GeGLU 96, tables [2, 1024, 64]
    (enough for the longest side the processor gives at 280 soft tokens, 840 patches).

Converter facts kept here:
  - v.patch_embd.weight is the HF Linear [n_embd, p * p * 3] (input order [ph, pw, C]) reshaped to a
    conv kernel [n_embd, 3, p, p] (numpy order; GGUF ne {p, p, 3, n_embd});
  - v.position_embd.weight keeps the HF shape [2, P, n_embd] (x table first) and is always F32;
  - each clipped linear's four scalars become 1-D tensors of one element (.input_min, .input_max,
    .output_min, .output_max), F32;
  - v_norm has no weight (nothing stored); the embedder's pre-projection norm has no weight either;
  - mm.input_projection.weight is the HF Linear [proj_dim, n_embd] as stored (no transpose).

Values keep activations in range with every path visible: linears std 1/sqrt(fan_in); norm gains
U(0.6, 1.4), q/k norm gains U(0.8, 1.2) x (4 / head_dim)^(1/4) so attention scores (scale 1.0 on
RMS-normed q and k) spread over a few units; position tables std 0.3; clip bounds U(2, 4) below and
above zero, so a few values of each unit-scale activation are clamped (a missing clamp shows)."""
import zlib

import numpy as np

PREFIX = "model.vision_tower."

SHAPES = {
    "e2b": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=16, num_attention_heads=12,
                num_key_value_heads=12, head_dim=64, position_embedding_size=10240),
    "tiny": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=4, head_dim=16, position_embedding_size=1024),
}

# GGUF layer tensor -> (HF module under encoder.layers.N, clipped linear?)
LAYER_TENSORS = {
    "attn_q": ("self_attn.q_proj", True),
    "attn_k": ("self_attn.k_proj", True),
    "attn_v": ("self_attn.v_proj", True),
    "attn_out": ("self_attn.o_proj", True),
    "attn_q_norm": ("self_attn.q_norm", False),
    "attn_k_norm": ("self_attn.k_norm", False),
    "ln1": ("input_layernorm", False),
    "attn_post_norm": ("post_attention_layernorm", False),
    "ln2": ("pre_feedforward_layernorm", False),
    "ffn_post_norm": ("post_feedforward_layernorm", False),
    "ffn_gate": ("mlp.gate_proj", True),
    "ffn_up": ("mlp.up_proj", True),
    "ffn_down": ("mlp.down_proj", True),
}
CLIP_SCALARS = ("input_min", "input_max", "output_min", "output_max")


def config(shape):
    """transformers.Gemma4VisionConfig keyword arguments for the shape."""
    if shape not in SHAPES:
        raise ValueError(f"gemma4_vision_tensors: unknown shape {shape!r} (tiny, e2b)")
    return dict(SHAPES[shape], patch_size=16, pooling_kernel_size=3, rms_norm_eps=1e-6,
                hidden_activation="gelu_pytorch_tanh", use_clipped_linears=True, standardize=False,
                rope_parameters={"rope_type": "axial", "rope_theta": 100.0})


def gguf_kv(cfg):
    """clip.vision.* keys as MmprojModel + Gemma4VisionAudioModel.set_gguf_parameters write them.
    cfg["proj_dim"] (the text model's n_embd) is set by the writer."""
    return {
        "clip.vision.projection_dim": int(cfg["proj_dim"]),
        "clip.vision.image_size": 224,  # the converter's placeholder (unused by Gemma 4)
        "clip.vision.patch_size": int(cfg["patch_size"]),
        "clip.vision.embedding_length": int(cfg["hidden_size"]),
        "clip.vision.feed_forward_length": int(cfg["intermediate_size"]),
        "clip.vision.block_count": int(cfg["num_hidden_layers"]),
        "clip.vision.attention.head_count": int(cfg["num_attention_heads"]),
        "clip.vision.image_mean": [0.0, 0.0, 0.0],  # Gemma4ImageProcessor: no normalisation
        "clip.vision.image_std": [1.0, 1.0, 1.0],
        "clip.vision.projector_type": "gemma4v",
        "clip.vision.attention.layer_norm_epsilon": float(cfg["rms_norm_eps"]),
    }


def force_f32(name):
    """Tensors the converter keeps F32 in an F16 file besides 1-D ones and *_norm.weight."""
    return name == "v.position_embd.weight"


def _shapes(cfg):
    d, ff, p = cfg["hidden_size"], cfg["intermediate_size"], cfg["patch_size"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out = [("v.patch_embd.weight", (d, 3, p, p)),
           ("v.position_embd.weight", (2, cfg["position_embedding_size"], d))]
    mats = {"attn_q": (nh * hd, d), "attn_k": (nkv * hd, d), "attn_v": (nkv * hd, d), "attn_out": (d, nh * hd),
            "ffn_gate": (ff, d), "ffn_up": (ff, d), "ffn_down": (d, ff)}
    for il in range(cfg["num_hidden_layers"]):
        for t, (_, clipped) in LAYER_TENSORS.items():
            if t in mats:
                out.append((f"v.blk.{il}.{t}.weight", mats[t]))
            else:
                out.append((f"v.blk.{il}.{t}.weight", (hd if t in ("attn_q_norm", "attn_k_norm") else d,)))
            if clipped:
                out += [(f"v.blk.{il}.{t}.{s}", (1,)) for s in CLIP_SCALARS]
    out.append(("mm.input_projection.weight", (cfg["proj_dim"], d)))
    return out


def _draw(name, shape, cfg, rng):
    if name.endswith(("input_min", "output_min")):
        return -rng.uniform(2.0, 4.0, shape)
    if name.endswith(("input_max", "output_max")):
        return rng.uniform(2.0, 4.0, shape)
    if name.endswith(("attn_q_norm.weight", "attn_k_norm.weight")):
        return rng.uniform(0.8, 1.2, shape) * (4.0 / cfg["head_dim"]) ** 0.25
    if len(shape) == 1:
        return rng.uniform(0.6, 1.4, shape)
    if name == "v.position_embd.weight":
        return 0.3 * rng.standard_normal(shape)
    fan_in = int(np.prod(shape[1:]))
    return rng.standard_normal(shape) / np.sqrt(fan_in)


def tensors(cfg, seed):
    """[(GGUF name, float32 array in GGUF numpy order)], one PCG64 stream per name (seed, crc32(name))."""
    out = []
    for name, shape in _shapes(cfg):
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        out.append((name, _draw(name, shape, cfg, rng).astype(np.float32)))
    return out


def hf_name(gguf_name):
    """GGUF name -> transformers' Gemma4ForConditionalGeneration state-dict name."""
    if gguf_name == "v.patch_embd.weight":
        return PREFIX + "patch_embedder.input_proj.weight"
    if gguf_name == "v.position_embd.weight":
        return PREFIX + "patch_embedder.position_embedding_table"
    if gguf_name == "mm.input_projection.weight":
        return "model.embed_vision.embedding_projection.weight"
    _, _, il, t, suffix = gguf_name.split(".")  # v.blk.N.tensor.suffix
    module, clipped = LAYER_TENSORS[t]
    base = f"{PREFIX}encoder.layers.{il}.{module}"
    if suffix == "weight":
        return base + (".linear.weight" if clipped else ".weight")
    return f"{base}.{suffix}"


def hf_state_dict(tensor_list):
    """The inverse of the converter: HF names and shapes (patch kernel back to [n_embd, p * p * 3] in
    [ph, pw, C] order, clip scalars back to 0-d)."""
    out = {}
    for name, a in tensor_list:
        if name == "v.patch_embd.weight":
            a = np.ascontiguousarray(a.transpose(0, 2, 3, 1)).reshape(a.shape[0], -1)
        elif name.endswith(CLIP_SCALARS):
            a = a.reshape(())
        out[hf_name(name)] = a
    return out
