"""Goldens of Gemma 4's audio path from transformers (torch venv, by hand; CI never runs this):

    ~/.cache/cactus/torch-venv/bin/python scripts/gemma4_audio_oracle.py

Builds Gemma4ForConditionalGeneration with the text config of tests/models/gemma4_tiny.py (hidden 128) and
the "tiny" audio config of scripts/gemma4_audio_tensors.py, loads both from the same numpy-seeded weights that
the GGUF writers write (gemma4_tiny.hf_tensors, gemma4_audio_tensors.hf_state_dict(tensors(cfg, SEED))), and
runs, for each clip of tests/models/audio/gemma4_audio_clips.py:
  - Gemma4AudioFeatureExtractor (the valid frames of input_features),
  - the audio tower (last_hidden_state, valid tokens) and the embedder (pooler_output rows),
  - the whole model on a prompt <bos> t t <boa> <audio>*n <eoa> t t: the first-token logits.
Writes tests/models/data/gemma4_audio_golden.npz (read by tests/models/audio/test_gemma4_audio_oracle.py)."""
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "audio"))
import gemma4_audio_clips as clips_mod  # noqa: E402
import gemma4_audio_tensors as A  # noqa: E402
import gemma4_tiny  # noqa: E402

SEED = 20261206  # the audio tensors' seed (make_gemma4_mmproj.py --seed)
BOA, AUDIO, EOA = 300, 301, 302  # ordinary ids of the tiny vocabulary standing in for <|audio>, <|audio|>, <audio|>
OUT = os.path.join(REPO, "tests", "models", "data", "gemma4_audio_golden.npz")


def prompt(n_tokens):
    return [2, 57, 91, BOA] + [AUDIO] * n_tokens + [EOA, 123, 77]


def build_model(cfg):
    import torch
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    config = Gemma4Config(text_config=dict(gemma4_tiny.CONFIG), audio_config=A.hf_config(cfg), vision_config=None,
                          boa_token_id=BOA, audio_token_id=AUDIO, eoa_token_index=EOA)
    config.text_config._attn_implementation = "eager"
    model = Gemma4ForConditionalGeneration(config).eval().float()
    state = {}
    for name, a in gemma4_tiny.hf_tensors().items():
        state["model.language_model." + name[len("model."):]] = torch.from_numpy(a)
    for name, a in A.hf_state_dict(A.tensors(cfg, SEED)).items():
        state[name] = torch.from_numpy(a)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]
    assert not missing and not unexpected, (missing[:8], unexpected[:8])
    return model


def main():
    import torch
    from transformers import Gemma4AudioFeatureExtractor

    cfg = A.config("tiny")
    model = build_model(cfg)
    fe = Gemma4AudioFeatureExtractor()
    samples = clips_mod.clips()
    out = {"clips_sha256": np.array(clips_mod.digest(samples)), "seed": np.array(SEED)}
    for k, x in enumerate(samples):
        f = fe([x], return_tensors="pt")  # a batch of one (a bare 1-D array trips the extractor)
        feats, mask = f["input_features"].float(), f["input_features_mask"]
        with torch.no_grad():
            tower = model.model.audio_tower(feats, mask, return_dict=True)
            valid = tower.attention_mask[0]
            hidden = tower.last_hidden_state[0][valid]
            rows = model.model.embed_audio(inputs_embeds=tower.last_hidden_state)[0][valid]
            ids = torch.tensor([prompt(int(valid.sum()))])
            logits = model(input_ids=ids, input_features=feats, input_features_mask=mask).logits[0, -1]
        n_frames = int(mask[0].sum())
        out[f"features_{k}"] = feats[0, :n_frames].numpy()
        out[f"tower_{k}"] = hidden.numpy()
        out[f"rows_{k}"] = rows.numpy()
        out[f"prompt_{k}"] = np.array(prompt(int(valid.sum())), dtype=np.int32)
        out[f"logits_{k}"] = logits.numpy()
        print(f"clip {k}: {x.size} samples, {n_frames} frames, {int(valid.sum())} tokens, "
              f"tower |max| {hidden.abs().max():.3f}, rows std {rows.std():.3f}, "
              f"logits std {logits.std():.3f}")
    np.savez_compressed(OUT, **out)
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
