"""One-off cross-check of LFM2-VL's image path against Hugging Face transformers (outside CI: needs
the torch venv of scripts/check_transformers.sh plus torchvision and Pillow, which transformers'
Lfm2VlImageProcessor uses).

Chain: a random-init Lfm2VlForConditionalGeneration from a small config (SigLIP2 NaFlex 3 x 128:
the converter maps mm.{1,2} only below the block count; the real 16 x 16 position grid and 16-px
patches; projector with layer norm, 512 -> 256 -> 256; lfm2 text 4 x 256) -> llama.cpp's
converter (convert_hf_to_gguf.py --mmproj from the llama-cpp-python 0.3.36 sdist, f32) -> our
encoder (bin/vision_probe encode) and libmtmd (the oracle venv), against transformers'
processor + get_image_features on the same images. Per image and part: the preprocessed pixels
(max difference in 8-bit levels from transformers' normalized patches) and the embeddings (max
|difference| / max |transformers|); first, resize_image_torch against torchvision on 60 random
size pairs.

  scripts/check_lfm2vl_transformers.sh     (torch venv + torchvision, sdist, then runs this)

The text side: the language model converted alone (Lfm2ForCausalLM, untied head, test vocabulary
with the markers) and the log-probabilities of the token after the image's prompt compared:
transformers (its image features spliced at the layout's image rows) vs ours (vision_probe generate)
vs llama.cpp (libmtmd's own preprocessing and encoder).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "vision"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
import vision_images  # noqa: E402
from hf_check_common import converter_on_path, kl, log_softmax, run_converter, save_text_model  # noqa: E402
from lfm2_synthetic import lfm2_vocab  # noqa: E402

SPECIALS = (["<|image_start|>", "<|image_end|>", "<|img_thumbnail|>", "<image>"] +
            [f"<|img_row_{r}_col_{c}|>" for r in range(1, 11) for c in range(1, 11)])  # make_vlm_gguf's
VOCAB = lfm2_vocab(SPECIALS)

SIZES = [(640, 480), (33, 17), (1536, 512), (1024, 768), (1024, 1024), (700, 1500)]
N_EMBD_TEXT = 256


def random_lfm2vl(seed):
    from transformers import Lfm2VlConfig, Lfm2VlForConditionalGeneration

    torch.manual_seed(seed)
    config = Lfm2VlConfig(
        vision_config=dict(model_type="siglip2_vision_model", hidden_size=128, intermediate_size=256,
                           num_hidden_layers=3, num_attention_heads=4, num_patches=256, patch_size=16,
                           hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, vision_use_head=False),
        text_config=dict(model_type="lfm2", vocab_size=len(VOCAB[0]), hidden_size=N_EMBD_TEXT, intermediate_size=512,
                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, full_attn_idxs=[1, 3],
                         norm_eps=1e-5, conv_L_cache=3, block_auto_adjust_ff_dim=False, max_position_embeddings=4096,
                         tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        projector_hidden_size=256, downsample_factor=2, projector_use_layernorm=True, tie_word_embeddings=False)
    config._attn_implementation = "eager"
    model = Lfm2VlForConditionalGeneration(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "vision_tower" not in name and "multi_modal_projector" not in name:
                if "norm" in name:
                    p.copy_(1.0 + 0.3 * torch.randn_like(p))
                elif "conv.weight" in name and p.dim() == 3:  # depthwise taps
                    p.copy_(0.6 * torch.randn_like(p))
                elif p.dim() == 2:  # untied head scaled so the logits spread by ~3 (neither flat nor one-hot)
                    scale = 1.0 if "embed_tokens" in name else (3.0 if "lm_head" in name else 1.0) / np.sqrt(p.shape[1])
                    p.copy_(scale * torch.randn_like(p))
                continue
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
            elif "position_embedding" in name:
                p.copy_(0.5 * torch.randn_like(p))
            elif p.dim() == 2:
                p.copy_(torch.randn_like(p) / np.sqrt(p.shape[1]))
    return model


def hub_names(hf_dir):
    """transformers 5.24 saves the vision tower as vision_tower.*; the hub checkpoints (and the
    converter's tensor map) have vision_tower.vision_model.*: rename in the saved file. The untied
    lm_head (the hub checkpoints tie it) is dropped: the mmproj converter has no name for it, and the
    text model is converted from memory (convert_text)."""
    from safetensors.torch import load_file, save_file

    path = os.path.join(hf_dir, "model.safetensors")
    tensors = load_file(path)
    renamed = {}
    for name, t in tensors.items():
        if name == "lm_head.weight":
            continue
        i = name.find("vision_tower.")
        if i >= 0 and "vision_tower.vision_model." not in name:
            name = name[:i] + "vision_tower.vision_model." + name[i + len("vision_tower."):]
        renamed[name] = t
    save_file(renamed, path, metadata={"format": "pt"})


def convert_mmproj(hf_dir, out_path, sdist):
    run_converter(sdist, [hf_dir, "--outfile", out_path, "--outtype", "f32", "--mmproj"])


def convert_text(model, workdir, out_path, sdist):
    """The language model alone as an Lfm2ForCausalLM (untied head, as the VL model here), through the
    converter with the test vocabulary (markers included)."""
    from transformers import Lfm2ForCausalLM

    hf_dir = os.path.join(workdir, "text")
    save_text_model(Lfm2ForCausalLM, model.config.text_config, model.model.language_model.state_dict(),
                    model.lm_head.weight, hf_dir)
    converter_on_path(sdist)
    from conversion import get_model_class

    tokens, types, merges = VOCAB

    def set_vocab(self):
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre("lfm2")
        self.gguf_writer.add_token_list(tokens)
        self.gguf_writer.add_token_types(types)
        self.gguf_writer.add_token_merges(merges)
        self.gguf_writer.add_eos_token_id(tokens.index("<|im_end|>"))
        self.gguf_writer.add_add_bos_token(False)

    get_model_class("Lfm2ForCausalLM").set_vocab = set_vocab
    run_converter(sdist, [hf_dir, "--outfile", out_path, "--outtype", "f32"])


def transformers_first_logits(model, layout, parts):
    """Log-probabilities of the token after the image's prompt (no BOS): `layout` as vision_probe
    prints it, `parts` transformers' (tiles row-major, then the thumbnail)."""
    index = {t: i for i, t in enumerate(VOCAB[0])}
    n_tiles = len(parts) - 1
    emb = model.model.language_model.get_input_embeddings()
    rows = []
    for piece in layout:
        if "text" in piece:
            text, i = piece["text"], 0
            while i < len(text):
                j = text.index("|>", i) + 2
                rows.append(emb(torch.tensor([index[text[i:j]]]))[0])
                i = j
        else:
            k = piece["part"]
            feats = parts[k - 1][1] if k > 0 else parts[n_tiles if n_tiles > 0 else 0][1]
            rows.extend(torch.from_numpy(feats).float())
    with torch.no_grad():
        x = torch.stack(rows)[None]
        h = model.model.language_model(inputs_embeds=x).last_hidden_state
        logits = model.lm_head(h)[0, -1].double().numpy()
    return log_softmax(logits)


def transformers_parts(model, rgb):
    """Per part (tiles row-major, then the thumbnail; or the one image): (pixels [h, w, 3] in 0..255 as
    float, embeddings [tokens, n_embd])."""
    from transformers import Lfm2VlImageProcessor

    proc = Lfm2VlImageProcessor()
    out = proc(images=[torch.from_numpy(rgb).permute(2, 0, 1)], return_tensors="pt")
    pv, shapes, mask = out["pixel_values"], out["spatial_shapes"], out["pixel_attention_mask"]
    with torch.no_grad():
        feats = model.model.get_image_features(pixel_values=pv, spatial_shapes=shapes,
                                               pixel_attention_mask=mask).pooler_output
    parts = []
    for k in range(pv.shape[0]):
        gh, gw = [int(v) for v in shapes[k]]
        patches = pv[k, :gh * gw].reshape(gh, gw, 16, 16, 3).permute(0, 2, 1, 3, 4).reshape(gh * 16, gw * 16, 3)
        parts.append(((patches.double().numpy() * 0.5 + 0.5) * 255.0, feats[k].double().numpy()))
    return parts


def ours_parts(probe, mmproj, png, prefix):
    """Same order as transformers: tiles row-major, then the overview (our part 0)."""
    r = subprocess.run([probe, "encode", mmproj, png, prefix, "--threads", "2"], capture_output=True, text=True)
    meta = json.loads(r.stdout)
    if "error" in meta:
        sys.exit("vision_probe: " + meta["error"])
    flat = np.fromfile(prefix + ".f32", np.float32).reshape(-1, meta["n_embd"])
    rgb = np.fromfile(prefix + ".rgb", np.uint8)
    parts, row, px = [], 0, 0
    for (w, h), n in zip(meta["part_sizes"], meta["part_tokens"]):
        parts.append((rgb[px:px + w * h * 3].reshape(h, w, 3).astype(np.float64), flat[row:row + n].astype(np.float64)))
        row, px = row + n, px + w * h * 3
    return parts[1:] + parts[:1]


def mtmd_first_logits(oracle_python, text, mmproj, png, out_npy):
    code = ("import sys, numpy as np; sys.path.insert(0, %r); import mtmd_oracle;"
            "first, _ = mtmd_oracle.mtmd_generate(%r, %r, np.load(%r), n_gen=1); np.save(%r, first)")
    code = code % (os.path.join(REPO, "tests", "models", "vision"), text, mmproj, png + ".npy", out_npy)
    subprocess.run([oracle_python, "-c", code], check=True, capture_output=True)
    return log_softmax(np.load(out_npy))


def ours_first_logits(probe, text, mmproj, png, out_f32):
    r = subprocess.run([probe, "generate", text, mmproj, png, out_f32, "--n", "1", "--chunk", "64", "--threads", "2"],
                       capture_output=True, text=True)
    meta = json.loads(r.stdout)
    if "error" in meta:
        sys.exit("vision_probe: " + meta["error"])
    return log_softmax(np.fromfile(out_f32, np.float32))


def mtmd_parts(oracle_python, text, mmproj, png, out_npz):
    """libmtmd's image chunks in prompt order (tiles, then the thumbnail) via the oracle venv."""
    code = ("import sys, numpy as np; sys.path.insert(0, %r); import mtmd_oracle;"
            "rgb = np.load(%r); ref = mtmd_oracle.mtmd_layout(%r, %r, rgb);"
            "np.savez(%r, *[v for k, v in ref if k == 'image'])")
    code = code % (os.path.join(REPO, "tests", "models", "vision"), png + ".npy", text, mmproj, out_npz)
    subprocess.run([oracle_python, "-c", code], check=True, capture_output=True)
    z = np.load(out_npz)
    return [z[f"arr_{i}"].astype(np.float64) for i in range(len(z.files))]


def check_torch_resize(probe, workdir, pairs=60):
    """resize_image_torch (vision_probe resize ... torch-bilinear) against torchvision's uint8
    antialiased bilinear resize on random size pairs (up, down, mixed): counts exact results."""
    from torchvision.transforms.v2 import functional as F

    rng = np.random.default_rng(1)
    exact = 0
    for t in range(pairs):
        w, h = [int(v) for v in rng.integers(5, 900, 2)]
        W, H = [int(v) for v in rng.integers(5, 1100, 2)]
        rgb = vision_images.image(w, h, t)
        png, out = os.path.join(workdir, "r.png"), os.path.join(workdir, "r.rgb")
        vision_images.write_png(png, rgb)
        subprocess.run([probe, "resize", png, str(W), str(H), "torch-bilinear", out], check=True, capture_output=True)
        ours = np.fromfile(out, np.uint8).reshape(H, W, 3).astype(int)
        ref = F.resize(torch.from_numpy(rgb).permute(2, 0, 1)[None], [H, W], interpolation=F.InterpolationMode.BILINEAR,
                       antialias=True)[0].permute(1, 2, 0).numpy().astype(int)
        if np.array_equal(ours, ref):
            exact += 1
        else:
            print(f"  resize {w}x{h} -> {W}x{H}: max difference {np.abs(ours - ref).max()} levels")
    print(f"torch uint8 bilinear resize: {exact}/{pairs} size pairs bit-exact")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdist", required=True, help="unpacked llama_cpp_python-0.3.36 sdist")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--llama-python", default=os.path.expanduser("~/.cache/cactus/oracle/venv/bin/python"))
    args = ap.parse_args()
    probe = os.path.join(args.build, "bin", "vision_probe")
    model = random_lfm2vl(5)
    with tempfile.TemporaryDirectory() as d:
        check_torch_resize(probe, d)
        from transformers import Lfm2VlImageProcessor

        hf_dir = os.path.join(d, "hf")
        model.save_pretrained(hf_dir, safe_serialization=True)
        Lfm2VlImageProcessor().save_pretrained(hf_dir)
        hub_names(hf_dir)
        mmproj = os.path.join(d, "mmproj.gguf")
        convert_mmproj(hf_dir, mmproj, args.sdist)
        text = os.path.join(d, "text.gguf")
        convert_text(model, d, text, args.sdist)
        for i, (w, h) in enumerate(SIZES):
            rgb = vision_images.image(w, h, i)
            png = os.path.join(d, f"img{i}.png")
            vision_images.write_png(png, rgb)
            np.save(png + ".npy", rgb)
            theirs = transformers_parts(model, rgb)
            ours = ours_parts(probe, mmproj, png, os.path.join(d, "o"))
            layout = json.loads(subprocess.run([probe, "encode", mmproj, png, os.path.join(d, "o"), "--threads", "2"],
                                               capture_output=True, text=True).stdout)["layout"]
            ref = transformers_first_logits(model, layout, theirs)
            mine = ours_first_logits(probe, text, mmproj, png, os.path.join(d, "l.f32"))
            llama = mtmd_first_logits(args.llama_python, text, mmproj, png, os.path.join(d, "l.npy"))
            top = lambda x: [int(t) for t in np.argsort(-x)[:5]]  # noqa: E731
            first = (f"  first token after the image: KL(transformers || cactus) {kl(ref, mine):.2e}, "
                     f"KL(transformers || llama.cpp) {kl(ref, llama):.2e}; top-5 transformers {top(ref)}, "
                     f"cactus {top(mine)}, llama.cpp {top(llama)}")
            mtmd = mtmd_parts(args.llama_python, text, mmproj, png, os.path.join(d, "m.npz"))
            print(f"{w}x{h}: {len(theirs)} part(s) (transformers), {len(ours)} (cactus), {len(mtmd)} (libmtmd)")
            for k, (tp, te) in enumerate(theirs):
                name = "thumbnail" if k == len(theirs) - 1 and len(theirs) > 1 else ("tile %d" % k if len(theirs) > 1 else "image")
                line = f"  {name:10s} {tp.shape[1]}x{tp.shape[0]}"
                if k < len(ours) and ours[k][0].shape == tp.shape:
                    op, oe = ours[k]
                    line += f" | cactus pixels max {np.abs(op - tp).max():5.2f} levels, mean {np.abs(op - tp).mean():.3f};"
                    line += f" embd {np.abs(oe - te).max() / np.abs(te).max():.2e}"
                else:
                    line += " | cactus: shape differs"
                if k < len(mtmd) and mtmd[k].shape == te.shape:
                    line += f" | libmtmd embd {np.abs(mtmd[k] - te).max() / np.abs(te).max():.2e}"
                else:
                    line += " | libmtmd: shape differs"
                print(line)
            print(first, flush=True)


if __name__ == "__main__":
    main()
