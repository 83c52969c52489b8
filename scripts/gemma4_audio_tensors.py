"""Gemma 4's audio tower (the USM conformer + its embedder) as numpy-seeded tensors, named and shaped as
llama.cpp's converter writes them into an mmproj (conversion/gemma.py Gemma4VisionAudioModel.modify_tensors,
gguf-py's tensor_mapping a.* names, MmprojModel.set_gguf_parameters' clip.audio.* keys).

scripts/make_gemma4_mmproj.py imports this module when --towers includes audio (contract 1 of issue 42):
    config(shape)        transformers' Gemma4AudioConfig values for "tiny" or "e2b", plus proj_dim (the text
                         model's hidden size, which the embedder projects to; the writer may override it)
    gguf_kv(cfg)         clip.audio.* key -> value
    tensors(cfg, seed)   [(GGUF name, float32 array in GGUF/numpy order)], in the converter's order
    hf_state_dict(ts)    the inverse: transformers' parameter names and shapes (Gemma4ForConditionalGeneration)
    force_f32(name, nd)  whether the converter keeps a tensor F32 in an F16 file

What the converter changes on the way (and hf_state_dict undoes):
  - "model.audio_tower." becomes "conformer." and ".linear." is dropped before the name map;
  - per_dim_scale is stored after softplus (the C++ multiplies by it as it is);
  - the depthwise conv [n, 1, k] is stored as [n, k];
  - the clipped linears' 0-d input/output min/max buffers become 1-element tensors.
F32 in an F16 file: every 1-D tensor (norms, biases, scalars, per_dim_scale), and tensor_force_quant's audio rule
`".conv" in name or ("_conv" in name and ".weight" in name)` on the HF name, which catches both SSCP convs, the
depthwise conv and also subsample_conv_projection.input_proj_linear.weight.

Weights: each tensor has its own stream, numpy PCG64 seeded with (seed, crc32(GGUF name)). Linears have unit
gain (std 1/sqrt(n_in)); norm gains are drawn in [0.6, 1.4]; the clip bounds sit at 2..4 so some activations
are clipped (unbounded ones would leave the clamps untested), as in the real checkpoint, which stores finite
bounds for every clipped linear."""
import zlib

import numpy as np

# Gemma4AudioConfig keyword arguments; proj_dim is the text model's hidden size (not part of the audio config).
CONFIGS = {
    # Every structural feature of E2B's tower at small widths: 128 mel bins and 128 first SSCP channels are
    # fixed by the model code ((channels[0] // 4) * channels[1] is the projection's input width), the chunk
    # (12), left context (13) and depthwise kernel (5) are E2B's, so the chunked attention and rel_shift are
    # exercised as they are.
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, subsampling_conv_channels=[128, 8],
                 conv_kernel_size=5, attention_chunk_size=12, attention_context_left=13, attention_context_right=0,
                 attention_logit_cap=50.0, rms_norm_eps=1e-6, output_proj_dims=96, proj_dim=128),
    # google/gemma-4-E2B-it's audio_config (research/GEMMA4.md §5.2).
    "e2b": dict(hidden_size=1024, num_hidden_layers=12, num_attention_heads=8, subsampling_conv_channels=[128, 32],
                conv_kernel_size=5, attention_chunk_size=12, attention_context_left=13, attention_context_right=0,
                attention_logit_cap=50.0, rms_norm_eps=1e-6, output_proj_dims=1536, proj_dim=1536),
}
N_MELS = 128
CLIP_SUFFIXES = ("input_min", "input_max", "output_min", "output_max")

# HF (per layer, after "model.audio_tower.layers.N.") -> GGUF (after "a.blk.N.") for the clipped linears.
CLIPPED = {
    "feed_forward1.ffw_layer_1": "ffn_up", "feed_forward1.ffw_layer_2": "ffn_down",
    "feed_forward2.ffw_layer_1": "ffn_up_1", "feed_forward2.ffw_layer_2": "ffn_down_1",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.post": "attn_out", "lconv1d.linear_start": "conv_pw1", "lconv1d.linear_end": "conv_pw2",
}
LAYER_PLAIN = {
    "feed_forward1.pre_layer_norm.weight": "ffn_norm.weight",
    "feed_forward1.post_layer_norm.weight": "ffn_post_norm.weight",
    "feed_forward2.pre_layer_norm.weight": "ffn_norm_1.weight",
    "feed_forward2.post_layer_norm.weight": "ffn_post_norm_1.weight",
    "self_attn.relative_k_proj.weight": "attn_k_rel.weight",
    "self_attn.per_dim_scale": "per_dim_scale.weight",
    "lconv1d.depthwise_conv1d.weight": "conv_dw.weight",
    "lconv1d.pre_layer_norm.weight": "conv_norm.weight",
    "lconv1d.conv_norm.weight": "norm_conv.weight",
    "norm_pre_attn.weight": "attn_pre_norm.weight",
    "norm_post_attn.weight": "attn_post_norm.weight",
    "norm_out.weight": "ln2.weight",
}
GLOBAL = {
    "model.audio_tower.subsample_conv_projection.layer0.conv.weight": "a.conv1d.0.weight",
    "model.audio_tower.subsample_conv_projection.layer0.norm.weight": "a.conv1d.0.norm.weight",
    "model.audio_tower.subsample_conv_projection.layer1.conv.weight": "a.conv1d.1.weight",
    "model.audio_tower.subsample_conv_projection.layer1.norm.weight": "a.conv1d.1.norm.weight",
    "model.audio_tower.subsample_conv_projection.input_proj_linear.weight": "a.input_projection.weight",
    "model.audio_tower.output_proj.weight": "a.pre_encode.out.weight",
    "model.audio_tower.output_proj.bias": "a.pre_encode.out.bias",
    "model.embed_audio.embedding_projection.weight": "mm.a.input_projection.weight",
}


def config(shape):
    if shape not in CONFIGS:
        raise ValueError(f"gemma4_audio_tensors: unknown shape {shape!r} (tiny or e2b)")
    return {k: (list(v) if isinstance(v, list) else v) for k, v in CONFIGS[shape].items()}


def hf_config(cfg):
    """The Gemma4AudioConfig keyword arguments of cfg (proj_dim removed)."""
    return {k: v for k, v in cfg.items() if k != "proj_dim"}


def gguf_kv(cfg):
    """MmprojModel + Gemma4VisionAudioModel.set_gguf_parameters for the audio half (the converter sets
    intermediate_size = 4 * hidden_size and feat_in = input_feat_size, default 128)."""
    return {
        "clip.audio.projector_type": "gemma4a",
        "clip.audio.projection_dim": int(cfg["proj_dim"]),
        "clip.audio.embedding_length": int(cfg["hidden_size"]),
        "clip.audio.feed_forward_length": int(cfg["hidden_size"]) * 4,
        "clip.audio.block_count": int(cfg["num_hidden_layers"]),
        "clip.audio.attention.head_count": int(cfg["num_attention_heads"]),
        "clip.audio.num_mel_bins": N_MELS,
        "clip.audio.attention.layer_norm_epsilon": float(cfg["rms_norm_eps"]),
    }


def hf_shapes(cfg):
    """transformers' parameter and buffer names -> shapes (0-d clip buffers as ())."""
    h, c0, c1 = cfg["hidden_size"], *cfg["subsampling_conv_channels"]
    d = h // cfg["num_attention_heads"]
    t = "model.audio_tower."
    shapes = {
        t + "subsample_conv_projection.layer0.conv.weight": (c0, 1, 3, 3),
        t + "subsample_conv_projection.layer0.norm.weight": (c0,),
        t + "subsample_conv_projection.layer1.conv.weight": (c1, c0, 3, 3),
        t + "subsample_conv_projection.layer1.norm.weight": (c1,),
        t + "subsample_conv_projection.input_proj_linear.weight": (h, (c0 // 4) * c1),
        t + "output_proj.weight": (cfg["output_proj_dims"], h),
        t + "output_proj.bias": (cfg["output_proj_dims"],),
        "model.embed_audio.embedding_projection.weight": (cfg["proj_dim"], cfg["output_proj_dims"]),
    }
    io = {"feed_forward1.ffw_layer_1": (4 * h, h), "feed_forward1.ffw_layer_2": (h, 4 * h),
          "feed_forward2.ffw_layer_1": (4 * h, h), "feed_forward2.ffw_layer_2": (h, 4 * h),
          "self_attn.q_proj": (h, h), "self_attn.k_proj": (h, h), "self_attn.v_proj": (h, h),
          "self_attn.post": (h, h), "lconv1d.linear_start": (2 * h, h), "lconv1d.linear_end": (h, h)}
    for il in range(cfg["num_hidden_layers"]):
        p = f"{t}layers.{il}."
        for mod, shape in io.items():
            shapes[p + mod + ".linear.weight"] = shape
            for s in CLIP_SUFFIXES:
                shapes[p + mod + "." + s] = ()
        for suffix in LAYER_PLAIN:
            shapes[p + suffix] = (h,)
        shapes[p + "self_attn.relative_k_proj.weight"] = (h, h)
        shapes[p + "self_attn.per_dim_scale"] = (d,)
        shapes[p + "lconv1d.depthwise_conv1d.weight"] = (h, 1, cfg["conv_kernel_size"])
    return dict(sorted(shapes.items()))


def gguf_name(hf_name):
    if hf_name in GLOBAL:
        return GLOBAL[hf_name]
    prefix = "model.audio_tower.layers."
    assert hf_name.startswith(prefix), hf_name
    il, suffix = hf_name[len(prefix):].split(".", 1)
    if suffix in LAYER_PLAIN:
        return f"a.blk.{il}.{LAYER_PLAIN[suffix]}"
    mod, leaf = suffix.rsplit(".", 1)
    if leaf == "weight":  # "<mod>.linear.weight"
        mod = mod[: -len(".linear")]
    return f"a.blk.{il}.{CLIPPED[mod]}.{leaf}"


def force_f32(name, n_dims=2):
    """True when the converter writes this GGUF tensor as F32 in an F16 mmproj: every 1-D tensor, and the audio
    rule of tensor_force_quant (on the HF names: the SSCP convs, the depthwise convs, the SSCP's input_proj)."""
    return n_dims <= 1 or name.startswith("a.conv1d.") or name.endswith(".conv_dw.weight") or \
        name == "a.input_projection.weight"


def _draw_hf(name, shape, rng):
    """One HF tensor's values (module docstring for the scales)."""
    if name.endswith(("input_min", "output_min")):
        return -rng.uniform(2.0, 4.0, shape)
    if name.endswith(("input_max", "output_max")):
        return rng.uniform(2.0, 4.0, shape)
    if name.endswith("per_dim_scale"):  # softplus of this is the gain: 0.47 .. 0.97
        return rng.uniform(-0.5, 0.5, shape)
    if name.endswith("output_proj.bias"):
        return 0.1 * rng.standard_normal(shape)
    if len(shape) == 1:
        return rng.uniform(0.6, 1.4, shape)
    fan_in = int(np.prod(shape[1:]))
    return rng.standard_normal(shape) / np.sqrt(fan_in)


def _to_gguf(hf_name, a):
    if a.ndim == 0:
        return a.reshape(1)
    if hf_name.endswith("per_dim_scale"):
        return np.logaddexp(0.0, a.astype(np.float64))  # softplus, as the converter applies it
    if "lconv1d.depthwise_conv1d" in hf_name:
        return a.reshape(a.shape[0], a.shape[2])
    return a


def tensors(cfg, seed):
    """(GGUF name, float32 array) in the converter's order (HF names sorted)."""
    out = []
    for hf_name, shape in hf_shapes(cfg).items():
        name = gguf_name(hf_name)
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        a = np.asarray(_draw_hf(hf_name, shape, rng), dtype=np.float64)
        out.append((name, np.ascontiguousarray(_to_gguf(hf_name, a), dtype=np.float32)))
    return out


def hf_state_dict(gguf_tensors):
    """GGUF (name, array) pairs -> transformers' state dict entries (names and shapes of
    Gemma4ForConditionalGeneration: model.audio_tower.* and model.embed_audio.*)."""
    by_name = dict(gguf_tensors)
    n_layer = 1 + max(int(n.split(".")[2]) for n in by_name if n.startswith("a.blk."))
    h = by_name["a.input_projection.weight"].shape[0]
    c0 = by_name["a.conv1d.0.weight"].shape[0]
    c1 = by_name["a.conv1d.1.weight"].shape[0]
    d = by_name["a.blk.0.per_dim_scale.weight"].shape[0]
    cfg = dict(hidden_size=h, num_hidden_layers=n_layer, num_attention_heads=h // d,
               subsampling_conv_channels=[c0, c1], conv_kernel_size=by_name["a.blk.0.conv_dw.weight"].shape[1],
               output_proj_dims=by_name["a.pre_encode.out.weight"].shape[0],
               proj_dim=by_name["mm.a.input_projection.weight"].shape[0])
    out = {}
    for hf_name, shape in hf_shapes(cfg).items():
        a = by_name[gguf_name(hf_name)].astype(np.float64)
        if hf_name.endswith("per_dim_scale"):
            a = a + np.log(-np.expm1(-a))  # softplus^-1(y) = y + log(1 - e^-y)
        out[hf_name] = np.ascontiguousarray(a.reshape(shape), dtype=np.float32)
    return out
