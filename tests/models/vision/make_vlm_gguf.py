#!/usr/bin/env python3
"""Random-weight mmproj GGUFs for the vision tests, named and keyed exactly as llama.cpp's
convert_hf_to_gguf.py --mmproj writes them (conversion/smolvlm.py and MmprojModel in the
llama-cpp-python 0.3.36 sdist; read back by tools/mtmd/clip.cpp), plus a numpy forward pass of
the same encoder as an independent reference. numpy + gguf only (no torch).

  make_vlm_gguf.py idefics3 MMPROJ.gguf [--text TEXT.gguf] [--real]
      (--real: SmolVLM-256M widths for benchmarks; --text: a tiny llama text model with the markers)
  make_vlm_gguf.py lfm2 MMPROJ.gguf [--text TEXT.gguf] [--real]
      (LFM2-VL-450M's vision and projector widths, one layer unless --real; --text: an lfm2 text
      model at LFM2-350M's widths, 4 layers, with the image markers)
  make_vlm_gguf.py gemma3 MMPROJ.gguf [--real]
      (Gemma 3's SigLIP-So400m widths; --real: also its 896-px geometry and 27 layers; the text model
      is the real gemma3-270m, width 640)
"""
import argparse
import sys

import numpy as np
import gguf

# SmolVLM-256M-Instruct's vision tower (SigLIP at 512 px, 16-px patches, shuffle 4) and a small
# variant with the same geometry for CI (the preprocessing and token layout are the real ones).
IDEFICS3_REAL = dict(image_size=512, patch_size=16, n_embd=768, n_ff=3072, n_layer=12, n_head=12,
                     proj_dim=576, scale_factor=4, longest_edge=2048, eps=1e-6)
IDEFICS3_SMALL = dict(image_size=512, patch_size=16, n_embd=64, n_ff=128, n_layer=2, n_head=4,
                      proj_dim=96, scale_factor=4, longest_edge=1024, eps=1e-6)
# Gemma 3's vision tower (SigLIP-So400m: 1152 wide, 4304 FFN, 16 heads, 27 layers, 896 px / 14-px
# patches, 4x4 pooling to 256 tokens) and a CI variant at the real widths with one layer at 224 px
# (16 patches per side -> 4x4 = 16 tokens, the real pooling). proj_dim: gemma3-270m's width.
GEMMA3_REAL = dict(image_size=896, patch_size=14, n_embd=1152, n_ff=4304, n_layer=27, n_head=16, proj_dim=640,
                   scale_factor=4, eps=1e-6)
GEMMA3_SMALL = dict(image_size=224, patch_size=14, n_embd=1152, n_ff=4304, n_layer=1, n_head=16, proj_dim=640,
                    scale_factor=4, eps=1e-6)
# LFM2-VL-450M's vision tower (SigLIP2 NaFlex base: 768 wide, 3072 FFN, 12 heads, 12 layers, 16-px
# patches, a 16 x 16 learned position grid; the converter sets image_size 256) and projector
# (pixel unshuffle 2, layer norm, 3072 -> 2560 -> 1024 with GELU); the CI variant keeps every width
# and one layer. proj_dim: the lfm2 text width (LFM2-350M's 1024).
LFM2_REAL = dict(image_size=256, patch_size=16, n_embd=768, n_ff=3072, n_layer=12, n_head=12, proj_dim=1024,
                 scale_factor=2, proj_hidden=2560, eps=1e-6)
LFM2_SMALL = dict(LFM2_REAL, n_layer=1)
# The lfm2 text model of the LFM2-VL tests: LFM2-350M's widths at 4 layers (attention at 1 and 3).
LFM2_TEXT = dict(n_embd=1024, n_layer=4, n_head=16, n_head_kv=8, n_ff=2048, attn_layers=(1, 3), l_cache=3)
LFM2_SPECIALS = (["<|image_start|>", "<|image_end|>", "<|img_thumbnail|>", "<image>"] +
                 [f"<|img_row_{r}_col_{c}|>" for r in range(1, 11) for c in range(1, 11)])
MEAN = [0.5, 0.5, 0.5]
STD = [0.5, 0.5, 0.5]


def siglip_tensors(hp, seed, family="idefics3"):
    """name -> float32 array in numpy (row-major, outermost first) order."""
    rng = np.random.default_rng(seed)
    d, ff, p = hp["n_embd"], hp["n_ff"], hp["patch_size"]
    n_pos = (hp["image_size"] // p) ** 2
    s = hp["scale_factor"]

    def w(*shape, scale=None):
        fan_in = shape[-1] if len(shape) == 2 else int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * (scale or 1.0 / np.sqrt(fan_in))).astype(np.float32)

    t = {
        "v.patch_embd.weight": w(d, 3, p, p),
        "v.patch_embd.bias": w(d, scale=0.02),
        "v.position_embd.weight": w(n_pos, d, scale=0.1),
        "v.post_ln.weight": (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32),
        "v.post_ln.bias": w(d, scale=0.02),
    }
    if family == "lfm2":
        # Lfm2VlMultiModalProjector: layer norm over d * s * s, linear_1 (+bias), GELU, linear_2 (+bias).
        m, hid = d * s * s, hp["proj_hidden"]
        t["mm.input_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(m)).astype(np.float32)
        t["mm.input_norm.bias"] = w(m, scale=0.02)
        t["mm.1.weight"] = w(hid, m)
        t["mm.1.bias"] = w(hid, scale=0.02)
        t["mm.2.weight"] = w(hp["proj_dim"], hid)
        t["mm.2.bias"] = w(hp["proj_dim"], scale=0.02)
    elif family == "gemma3":
        # Gemma3MultiModalProjector: soft_emb_norm (the converter stores 1 + w) and the input
        # projection [vision width, text width], used as x @ W (so GGUF dims {proj_dim, n_embd}).
        t["mm.soft_emb_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        t["mm.input_projection.weight"] = w(d, hp["proj_dim"], scale=1.0 / np.sqrt(d))
    else:
        t["mm.model.fc.weight"] = w(hp["proj_dim"], d * s * s)
    for il in range(hp["n_layer"]):
        b = f"v.blk.{il}."
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t[b + n + ".weight"] = w(d, d)
            t[b + n + ".bias"] = w(d, scale=0.02)
        for n in ("ln1", "ln2"):
            t[b + n + ".weight"] = (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)
            t[b + n + ".bias"] = w(d, scale=0.02)
        t[b + "ffn_up.weight"] = w(ff, d)
        t[b + "ffn_up.bias"] = w(ff, scale=0.02)
        t[b + "ffn_down.weight"] = w(d, ff)
        t[b + "ffn_down.bias"] = w(d, scale=0.02)
    return t


def idefics3_tensors(hp, seed):
    return siglip_tensors(hp, seed, "idefics3")


def write_idefics3_mmproj(path, hp, seed=1, f16=False):
    t = idefics3_tensors(hp, seed)
    wr = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    wr.add_type(gguf.GGUFType.MMPROJ)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    # MmprojModel.set_gguf_parameters
    wr.add_clip_has_vision_encoder(True)
    wr.add_vision_projection_dim(hp["proj_dim"])
    wr.add_vision_image_size(hp["image_size"])
    wr.add_vision_patch_size(hp["patch_size"])
    wr.add_vision_embedding_length(hp["n_embd"])
    wr.add_vision_feed_forward_length(hp["n_ff"])
    wr.add_vision_block_count(hp["n_layer"])
    wr.add_vision_head_count(hp["n_head"])
    wr.add_vision_image_mean(MEAN)
    wr.add_vision_image_std(STD)
    # SmolVLMModel.set_gguf_parameters
    wr.add_clip_projector_type(gguf.VisionProjectorType.IDEFICS3)
    wr.add_vision_attention_layernorm_eps(hp["eps"])
    wr.add_vision_projector_scale_factor(hp["scale_factor"])
    wr.add_vision_use_gelu(True)
    wr.add_vision_preproc_image_size(hp["longest_edge"])
    for name, arr in t.items():
        # converter: embeddings F32 (tensor_force_quant), patch_embd F16 in f16 files, 1-D F32
        keep_f32 = (not f16) or arr.ndim == 1 or name.startswith("v.position_embd")
        wr.add_tensor(name, arr if keep_f32 else arr.astype(np.float16))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return t


def write_gemma3_mmproj(path, hp, seed=1, f16=False):
    """As conversion/gemma.py Gemma3VisionModel writes it: projector type gemma3, GELU, the layer norm
    eps, the scale factor only when it is not 4, input_projection always F16 (tensor_force_quant)."""
    t = siglip_tensors(hp, seed, "gemma3")
    wr = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    wr.add_type(gguf.GGUFType.MMPROJ)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    wr.add_clip_has_vision_encoder(True)
    wr.add_vision_projection_dim(hp["proj_dim"])
    wr.add_vision_image_size(hp["image_size"])
    wr.add_vision_patch_size(hp["patch_size"])
    wr.add_vision_embedding_length(hp["n_embd"])
    wr.add_vision_feed_forward_length(hp["n_ff"])
    wr.add_vision_block_count(hp["n_layer"])
    wr.add_vision_head_count(hp["n_head"])
    wr.add_vision_image_mean(MEAN)
    wr.add_vision_image_std(STD)
    wr.add_clip_projector_type(gguf.VisionProjectorType.GEMMA3)
    wr.add_vision_attention_layernorm_eps(hp["eps"])
    wr.add_vision_use_gelu(True)
    if hp["scale_factor"] != 4:
        wr.add_vision_projector_scale_factor(hp["scale_factor"])
    for name, arr in t.items():
        if name == "mm.input_projection.weight":
            t[name] = arr = arr.astype(np.float16).astype(np.float32)  # the reference sees the F16 values
            wr.add_tensor(name, arr.astype(np.float16))
            continue
        keep_f32 = (not f16) or arr.ndim == 1 or name.startswith("v.position_embd")
        wr.add_tensor(name, arr if keep_f32 else arr.astype(np.float16))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return t


def write_lfm2_mmproj(path, hp, seed=1, f16=False):
    """As conversion/lfm2.py LFM2VLModel writes it: image_size 256 (the position grid's side x patch),
    projector type lfm2, the layer-norm eps, scale factor (downsample_factor), GELU."""
    t = siglip_tensors(hp, seed, "lfm2")
    wr = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    wr.add_type(gguf.GGUFType.MMPROJ)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    wr.add_clip_has_vision_encoder(True)
    wr.add_vision_projection_dim(hp["proj_dim"])
    wr.add_vision_image_size(hp["image_size"])
    wr.add_vision_patch_size(hp["patch_size"])
    wr.add_vision_embedding_length(hp["n_embd"])
    wr.add_vision_feed_forward_length(hp["n_ff"])
    wr.add_vision_block_count(hp["n_layer"])
    wr.add_vision_head_count(hp["n_head"])
    wr.add_vision_image_mean(MEAN)
    wr.add_vision_image_std(STD)
    wr.add_clip_projector_type(gguf.VisionProjectorType.LFM2)
    wr.add_vision_attention_layernorm_eps(hp["eps"])
    wr.add_vision_projector_scale_factor(hp["scale_factor"])
    wr.add_vision_use_gelu(True)
    for name, arr in t.items():
        keep_f32 = (not f16) or arr.ndim == 1 or name.startswith("v.position_embd")
        wr.add_tensor(name, arr if keep_f32 else arr.astype(np.float16))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return t


def write_lfm2_text(path, seed=4, dims=None):
    """A random-weight F32 lfm2 text GGUF (tests/models/lfm2_synthetic.py) with LFM2-VL's image markers."""
    import os
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/models
    from lfm2_synthetic import write_lfm2
    return write_lfm2(path, seed, dims=dims or LFM2_TEXT, specials=LFM2_SPECIALS)


# ---- numpy reference ----------------------------------------------------------------------------

def _layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def siglip_trunk_ref(t, hp, planes):
    """planes [3, H, W] float -> patches [gh * gw, n_embd] after the post norm, float64."""
    p, d, s = hp["patch_size"], hp["n_embd"], hp["scale_factor"]
    _, H, W = planes.shape
    gh, gw = H // p, W // p
    patches = planes.reshape(3, gh, p, gw, p).transpose(1, 3, 0, 2, 4).reshape(gh * gw, 3 * p * p)
    x = patches @ t["v.patch_embd.weight"].reshape(d, -1).T + t["v.patch_embd.bias"]
    x = x + t["v.position_embd.weight"]
    nh = hp["n_head"]
    hd = d // nh
    for il in range(hp["n_layer"]):
        b = f"v.blk.{il}."
        h = _layer_norm(x, t[b + "ln1.weight"], t[b + "ln1.bias"], hp["eps"])
        q = (h @ t[b + "attn_q.weight"].T + t[b + "attn_q.bias"]).reshape(-1, nh, hd).transpose(1, 0, 2)
        k = (h @ t[b + "attn_k.weight"].T + t[b + "attn_k.bias"]).reshape(-1, nh, hd).transpose(1, 0, 2)
        v = (h @ t[b + "attn_v.weight"].T + t[b + "attn_v.bias"]).reshape(-1, nh, hd).transpose(1, 0, 2)
        a = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(-1, d)
        x = x + o @ t[b + "attn_out.weight"].T + t[b + "attn_out.bias"]
        h = _layer_norm(x, t[b + "ln2.weight"], t[b + "ln2.bias"], hp["eps"])
        h = _gelu_tanh(h @ t[b + "ffn_up.weight"].T + t[b + "ffn_up.bias"])
        x = x + h @ t[b + "ffn_down.weight"].T + t[b + "ffn_down.bias"]
    return _layer_norm(x, t["v.post_ln.weight"], t["v.post_ln.bias"], hp["eps"])


def average_pool_ref(x, gw, gh, k):
    """[gh * gw, d] -> [(gh / k) * (gw / k), d]: means of k x k blocks, row-major."""
    d = x.shape[-1]
    return x.reshape(gh // k, k, gw // k, k, d).mean(axis=(1, 3)).reshape(-1, d)


def gemma3_project_ref(t, hp, patches, gw, gh):
    """Pool, RMS norm with mm.soft_emb_norm (stored as 1 + w), x @ mm.input_projection."""
    x = average_pool_ref(patches, gw, gh, hp["scale_factor"])
    x = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + hp["eps"]) * t["mm.soft_emb_norm.weight"].astype(np.float64)
    return x @ t["mm.input_projection.weight"].astype(np.float64)


def gemma3_encode_ref(t, hp, planes):
    t64 = {k: v.astype(np.float64) for k, v in t.items()}
    side = planes.shape[1] // hp["patch_size"]
    return gemma3_project_ref(t64, hp, siglip_trunk_ref(t64, hp, planes), side, side)


def idefics3_encode_ref(t, hp, planes):
    """planes [3, H, W] float -> [tokens, proj_dim] in float64."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    p, d, s = hp["patch_size"], hp["n_embd"], hp["scale_factor"]
    _, H, W = planes.shape
    gh, gw = H // p, W // p
    x = siglip_trunk_ref(t, hp, planes)
    # pixel shuffle: token (Y, X) = concat over i, j of patch (Y*s+i, X*s+j)
    x = x.reshape(gh // s, s, gw // s, s, d).transpose(0, 2, 1, 3, 4).reshape((gh // s) * (gw // s), s * s * d)
    return x @ t["mm.model.fc.weight"].T


def normalize_planes(rgb_u8):
    """[H, W, 3] uint8 -> [3, H, W] float32 as clip.cpp: (x / 255 - mean) / std in float32."""
    x = rgb_u8.astype(np.float32) / np.float32(255.0)
    x = (x - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    return x.transpose(2, 0, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=["idefics3", "gemma3", "lfm2"])
    ap.add_argument("out")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--f16", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--text")
    a = ap.parse_args()
    if a.family == "lfm2":
        write_lfm2_mmproj(a.out, LFM2_REAL if a.real else LFM2_SMALL, a.seed, a.f16)
        if a.text:
            write_lfm2_text(a.text)
        return 0
    if a.family == "gemma3":
        write_gemma3_mmproj(a.out, GEMMA3_REAL if a.real else GEMMA3_SMALL, a.seed, a.f16)
        return 0
    hp = IDEFICS3_REAL if a.real else IDEFICS3_SMALL
    write_idefics3_mmproj(a.out, hp, a.seed, a.f16)
    if a.text:
        write_llama_text(a.text, hp["proj_dim"], IDEFICS3_SPECIALS)
    return 0



# ---- text model -----------------------------------------------------------------------------------
# A tiny llama-architecture text GGUF of the projector's width with an SPM vocabulary that holds the
# family's marker tokens, so llama.cpp's libmtmd can lay out and encode images (it looks the markers
# up by their text). Random weights: the text it would generate is noise.

IDEFICS3_SPECIALS = (["<fake_token_around_image>", "<global-img>", "<image>", "<end_of_utterance>"] +
                     [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)])


def text_vocab(specials):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # UNKNOWN, CONTROL, BYTE
    for word in ["\u2581", "\n\n", "\u2581a", "\u2581the", "\u2581image", "\u2581Describe", "."]:
        tokens.append(word)
        types.append(1)
    for s in specials:
        tokens.append(s)
        types.append(3)
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(len(tokens) - 259)]
    return tokens, scores, types


def write_llama_text(path, n_embd, specials, seed=2, n_layer=2, n_head=4, n_head_kv=2, n_ff=128, chat_template=None):
    rng = np.random.default_rng(seed)
    tokens, scores, types = text_vocab(specials)
    n_vocab = len(tokens)
    hd = n_embd // n_head
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_context_length(4096)
    wr.add_embedding_length(n_embd)
    wr.add_block_count(n_layer)
    wr.add_feed_forward_length(n_ff)
    wr.add_head_count(n_head)
    wr.add_head_count_kv(n_head_kv)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_rope_freq_base(10000.0)
    wr.add_rope_dimension_count(hd)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_unk_token_id(0)
    wr.add_add_bos_token(True)
    if chat_template is not None:
        wr.add_chat_template(chat_template)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    wr.add_tensor("token_embd.weight", w(n_vocab, n_embd))
    wr.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    wr.add_tensor("output.weight", w(n_vocab, n_embd))
    for il in range(n_layer):
        b = f"blk.{il}."
        wr.add_tensor(b + "attn_norm.weight", np.ones(n_embd, np.float32))
        wr.add_tensor(b + "attn_q.weight", w(n_embd, n_embd))
        wr.add_tensor(b + "attn_k.weight", w(n_head_kv * hd, n_embd))
        wr.add_tensor(b + "attn_v.weight", w(n_head_kv * hd, n_embd))
        wr.add_tensor(b + "attn_output.weight", w(n_embd, n_embd))
        wr.add_tensor(b + "ffn_norm.weight", np.ones(n_embd, np.float32))
        wr.add_tensor(b + "ffn_gate.weight", w(n_ff, n_embd))
        wr.add_tensor(b + "ffn_up.weight", w(n_ff, n_embd))
        wr.add_tensor(b + "ffn_down.weight", w(n_embd, n_ff))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


GEMMA3_SPECIALS = ["<start_of_image>", "<end_of_image>"]


def write_gemma3_text(path, n_embd=640, seed=3, n_layer=6, n_head=4, n_head_kv=1, head_dim=64, n_ff=256, window=32):
    """A random-weight F32 gemma3 text GGUF (llama.cpp's gemma3 keys and tensors: q/k norms, post
    norms, five sliding layers then a global one) of the projector's width, with an SPM vocabulary
    holding the image markers. F32 weights and small widths: llama.cpp and we agree to KL < 1e-5 on
    such files (tests/vision/test_vision_gemma3.py), so the image path can be compared sharply."""
    rng = np.random.default_rng(seed)
    tokens, scores, types = text_vocab(GEMMA3_SPECIALS)
    wr = gguf.GGUFWriter(path, "gemma3")
    wr.add_context_length(4096)
    wr.add_embedding_length(n_embd)
    wr.add_block_count(n_layer)
    wr.add_feed_forward_length(n_ff)
    wr.add_head_count(n_head)
    wr.add_head_count_kv(n_head_kv)
    wr.add_key_length(head_dim)
    wr.add_value_length(head_dim)
    wr.add_layer_norm_rms_eps(1e-6)
    wr.add_rope_freq_base(1000000.0)
    wr.add_sliding_window(window)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_unk_token_id(0)
    wr.add_add_bos_token(True)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    wr.add_tensor("token_embd.weight", w(len(tokens), n_embd))
    wr.add_tensor("output_norm.weight", norm(n_embd))
    for il in range(n_layer):
        b = f"blk.{il}."
        wr.add_tensor(b + "attn_norm.weight", norm(n_embd))
        wr.add_tensor(b + "attn_q.weight", w(n_head * head_dim, n_embd))
        wr.add_tensor(b + "attn_k.weight", w(n_head_kv * head_dim, n_embd))
        wr.add_tensor(b + "attn_v.weight", w(n_head_kv * head_dim, n_embd))
        wr.add_tensor(b + "attn_q_norm.weight", norm(head_dim))
        wr.add_tensor(b + "attn_k_norm.weight", norm(head_dim))
        wr.add_tensor(b + "attn_output.weight", w(n_embd, n_head * head_dim))
        wr.add_tensor(b + "post_attention_norm.weight", norm(n_embd))
        wr.add_tensor(b + "ffn_norm.weight", norm(n_embd))
        wr.add_tensor(b + "ffn_gate.weight", w(n_ff, n_embd))
        wr.add_tensor(b + "ffn_up.weight", w(n_ff, n_embd))
        wr.add_tensor(b + "ffn_down.weight", w(n_embd, n_ff))
        wr.add_tensor(b + "post_ffw_norm.weight", norm(n_embd))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return GEMMA3_SPECIALS


if __name__ == "__main__":
    sys.exit(main())
