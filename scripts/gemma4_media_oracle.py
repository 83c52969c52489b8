#!/usr/bin/env python3
"""Writes tests/models/data/gemma4_media_golden.npz from transformers (torch venv, by hand; CI never runs this):

    ~/.cache/cactus/torch-venv/bin/python scripts/gemma4_media_oracle.py

One Gemma4ForConditionalGeneration (fp32, eager attention) with the tiny text model of
tests/models/gemma4_tiny.py and BOTH tiny towers (scripts/gemma4_vision_tensors.py,
scripts/gemma4_audio_tensors.py) from the same numpy weights that make_gemma4_mmproj.py writes
(--shape tiny --towers vision,audio --type f32 --seed 20261206 --proj-dim 128). The prompt holds one
image (gemma4_vision_fixture.LOGITS_IMAGE at its budget) and one audio clip (gemma4_audio_clips, CLIP):

    <bos> t t <|image|> t t <|audio|> t t

expanded as Gemma4Processor does (its replace_image_token / replace_audio_token, fed the image
processor's and the feature extractor's outputs; the tiny vocabulary has no tokenizer, so the
placeholder strings map to ordinary ids). Saves the first-token logits and the expanded ids, read by
tests/models/test_gemma4_media_oracle.py."""
import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "audio"))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "vision"))
import gemma4_audio_clips as clips  # noqa: E402
import gemma4_audio_oracle as audio_oracle  # noqa: E402
import gemma4_audio_tensors as A  # noqa: E402
import gemma4_tiny  # noqa: E402
import gemma4_vision_fixture as fx  # noqa: E402
import gemma4_vision_tensors as V  # noqa: E402
import make_gemma4_mmproj  # noqa: E402

OUT = os.path.join(REPO, "tests", "models", "data", "gemma4_media_golden.npz")
SEED = audio_oracle.SEED
assert SEED == fx.SEED, "one mmproj holds both towers: one seed"
CLIP = 2  # 12345 samples, 20 soft tokens
# The tiny vocabulary's ordinary ids standing in for the markers (E2B: 255999 / 258880 / 258882 and
# 256000 / 258881 / 258883): the vision fixture's image ids, three fresh ones for audio.
IDS = {"<|image>": fx.BOI, "<|image|>": fx.IMAGE_TOKEN, "<image|>": fx.EOI,
       "<|audio>": 303, "<|audio|>": 304, "<audio|>": 305}
TEXT = [[2, 17, 99], [41, 77], [123, 5]]  # text around the image, then around the audio


def build_model():
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4VisionConfig

    config = Gemma4Config(text_config=dict(gemma4_tiny.CONFIG), vision_config=Gemma4VisionConfig(**V.config("tiny")),
                          audio_config=A.hf_config(A.config("tiny")), boi_token_id=IDS["<|image>"],
                          eoi_token_id=IDS["<image|>"], image_token_id=IDS["<|image|>"], boa_token_id=IDS["<|audio>"],
                          audio_token_id=IDS["<|audio|>"], eoa_token_index=IDS["<audio|>"])
    config._attn_implementation = "eager"
    config.text_config._attn_implementation = "eager"
    model = Gemma4ForConditionalGeneration(config).eval().float()
    state = {"model.language_model." + k[len("model."):]: torch.from_numpy(v) for k, v in gemma4_tiny.hf_tensors().items()}
    for tower, module in (("vision", V), ("audio", A)):
        cfg = make_gemma4_mmproj.tower_config(tower, "tiny", fx.PROJ_DIM)
        state.update({k: torch.from_numpy(np.ascontiguousarray(v))
                      for k, v in module.hf_state_dict(module.tensors(cfg, SEED)).items()})
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]
    assert not missing and not unexpected, (missing[:8], unexpected[:8])
    return model


def processor_ids(image_inputs, audio_inputs):
    """The prompt's ids as Gemma4Processor expands <|image|> and <|audio|> (its own replace methods)."""
    from transformers.models.gemma4.processing_gemma4 import Gemma4Processor

    proc = types.SimpleNamespace(boi_token="<|image>", image_token="<|image|>", eoi_token="<image|>",
                                 boa_token="<|audio>", audio_token="<|audio|>", eoa_token="<audio|>")
    image = Gemma4Processor.replace_image_token(proc, image_inputs, 0)
    audio = Gemma4Processor.replace_audio_token(proc, audio_inputs, 0)
    ids = list(TEXT[0])
    for expanded, after in ((image, TEXT[1]), (audio, TEXT[2])):
        pieces = expanded.replace(">", ">\0").split("\0")[:-1]  # every marker ends in ">"
        ids += [IDS[p] for p in pieces] + after
    return ids


def main():
    from transformers import Gemma4AudioFeatureExtractor
    from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessor

    torch.manual_seed(0)
    model = build_model()
    rgb, budget = fx.image(fx.LOGITS_IMAGE), fx.IMAGES[fx.LOGITS_IMAGE][3]
    image_inputs = Gemma4ImageProcessor(max_soft_tokens=budget)(
        images=[torch.from_numpy(rgb).permute(2, 0, 1)], return_tensors="pt")
    samples = clips.clip(CLIP)
    audio_inputs = Gemma4AudioFeatureExtractor()([samples], return_tensors="pt")
    ids = processor_ids(image_inputs, audio_inputs)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), pixel_values=image_inputs["pixel_values"],
                       image_position_ids=image_inputs["image_position_ids"],
                       input_features=audio_inputs["input_features"].float(),
                       input_features_mask=audio_inputs["input_features_mask"], use_cache=False).logits[0, -1]
    out = {"seed": np.array(SEED), "image_sha": np.array(fx.sha256(rgb)), "image_budget": np.array(budget),
           "clip": np.array(CLIP), "clip_sha": np.array(clips.digest([samples])),
           "ids": np.array(ids, dtype=np.int32), "logits": logits.float().numpy()}
    np.savez_compressed(OUT, **out)
    n_image = ids.count(IDS["<|image|>"])
    n_audio = ids.count(IDS["<|audio|>"])
    print(f"{len(ids)} tokens ({n_image} image, {n_audio} audio), logits std {logits.std():.3f}, "
          f"top p {torch.softmax(logits, -1).max():.3f}; wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
