#!/usr/bin/env python3
"""Writes tests/models/data/gemma4_vision_golden.npz from transformers (torch venv, by hand):

  source scripts/torch_check_env.sh && torch_venv vision   # torch + transformers + torchvision
  ~/.cache/cactus/torch-venv/bin/python scripts/gemma4_vision_oracle.py

(transformers 5.25, torch 2.15, torchvision 0.29: Gemma4ImageProcessor resizes with torchvision.)

The tiny vision tower of scripts/gemma4_vision_tensors.py (the same numpy weights the mmproj writer
stores, through hf_state_dict) and the tiny text model of tests/models/gemma4_tiny.py go into one
Gemma4ForConditionalGeneration (fp32, eager attention). For each image of
tests/models/vision/gemma4_vision_fixture.py: Gemma4ImageProcessor (torchvision backend) at the
image's budget, then the vision tower + embedder (model.model.get_image_features); the real patches
must be exact multiples of 1/255 (they are checked, then stored as the resized uint8 image's hash).
Then the first-token logits of BEFORE + <boi> + image tokens + <eoi> + AFTER with one image.
The CI test (tests/models/vision/test_vision_gemma4.py) rebuilds every input and compares."""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "models", "vision"))
import gemma4_vision_fixture as fx  # noqa: E402
import gemma4_tiny  # noqa: E402  (on the path through the fixture)
import gemma4_vision_tensors as gv  # noqa: E402

OUT = os.path.join(REPO, "tests", "models", "data", "gemma4_vision_golden.npz")


def build_model():
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

    vcfg = gv.config("tiny")
    config = Gemma4Config(text_config=Gemma4TextConfig(**gemma4_tiny.CONFIG), vision_config=Gemma4VisionConfig(**vcfg),
                          audio_config=None, boi_token_id=fx.BOI, eoi_token_id=fx.EOI,
                          image_token_id=fx.IMAGE_TOKEN)
    config._attn_implementation = "eager"
    model = Gemma4ForConditionalGeneration(config).eval()
    state = {k.replace("model.", "model.language_model.", 1): torch.from_numpy(v)
             for k, v in gemma4_tiny.hf_tensors(gemma4_tiny.SEED).items()}
    vcfg["proj_dim"] = fx.PROJ_DIM
    state.update({k: torch.from_numpy(np.ascontiguousarray(v))
                  for k, v in gv.hf_state_dict(gv.tensors(vcfg, fx.SEED)).items()})
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]
    assert not missing and not unexpected, (missing, unexpected)
    return model


def resized_image(pixel_values, positions):
    """The processor's real patches [n, 16 * 16 * 3] ([ph, pw, C]) back to the uint8 image."""
    real = positions[:, 0] >= 0
    pv, pos = pixel_values[real], positions[real]
    gw, gh = pos[:, 0].max() + 1, pos[:, 1].max() + 1
    u8 = np.rint(pv * 255.0)
    assert np.array_equal((u8.astype(np.float32) * np.float32(1 / 255)), pv), "pixels are not u8 * (1/255)"
    img = u8.reshape(gh, gw, 16, 16, 3).transpose(0, 2, 1, 3, 4).reshape(gh * 16, gw * 16, 3)
    return img.astype(np.uint8)


def main():
    from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessor

    torch.manual_seed(0)
    model = build_model()
    out = {"seed": fx.SEED}
    with torch.no_grad():
        for k, (w, h, seed, budget) in enumerate(fx.IMAGES):
            rgb = fx.image(k)
            proc = Gemma4ImageProcessor(max_soft_tokens=budget)
            feats = proc(images=[torch.from_numpy(rgb).permute(2, 0, 1)], return_tensors="pt")
            pv, pos = feats["pixel_values"], feats["image_position_ids"]
            resized = resized_image(pv[0].numpy(), pos[0].numpy())
            emb = model.model.get_image_features(pv, pos, return_dict=True).pooler_output
            emb = torch.cat(list(emb), 0) if isinstance(emb, (list, tuple)) else emb.reshape(-1, fx.PROJ_DIM)
            out[f"image{k}_sha"] = fx.sha256(rgb)
            out[f"image{k}_resized_sha"] = fx.sha256(resized)
            out[f"image{k}_resized_size"] = np.array([resized.shape[1], resized.shape[0]])
            out[f"image{k}_embd"] = emb.float().numpy()
            print(f"image {k}: {w}x{h} at {budget} -> {resized.shape[1]}x{resized.shape[0]}, {emb.shape[0]} tokens, "
                  f"embedding rms {emb.pow(2).mean().sqrt():.3f}")
            if k == fx.LOGITS_IMAGE:
                n_tok = emb.shape[0]
                ids = fx.BEFORE + [fx.BOI] + [fx.IMAGE_TOKEN] * n_tok + [fx.EOI] + fx.AFTER
                logits = model(input_ids=torch.tensor([ids]), pixel_values=pv, image_position_ids=pos,
                               use_cache=False).logits[0, -1]
                out["logits"] = logits.float().numpy()
                p = torch.softmax(logits, -1)
                print(f"first-token logits: std {logits.std():.3f}, top p {p.max():.3f}")
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
