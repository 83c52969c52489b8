"""The Gemma 4 vision goldens' inputs, shared by scripts/gemma4_vision_oracle.py (torch, by hand) and
tests/models/vision/test_vision_gemma4.py (CI, no torch): the mmproj (scripts/make_gemma4_mmproj.py,
tiny shape, f32, SEED), the images (vision_images.image: numpy-generated, odd sizes) with the
processor budget each is run at, and the prompt around the image for the first-token logits."""
import hashlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
import vision_images  # noqa: E402

SEED = 20261206
PROJ_DIM = 128  # tests/models/gemma4_tiny.py hidden_size
# (width, height, image seed, max_soft_tokens): upscaled to the default budget; a panorama at the
# smallest; 480x336 is already the 70-token size (no resize: libmtmd sees the same pixels).
IMAGES = [(217, 139, 1, 280), (300, 97, 2, 70), (480, 336, 3, 70)]
LOGITS_IMAGE = 1  # the image of the first-token logits prompt
# Gemma4Config ids for the tiny vocabulary (ordinary tokens there; E2B: 255999, 258880, 258882).
BOI, IMAGE_TOKEN, EOI = 301, 300, 302
BEFORE = [2, 17, 99, 250]  # <bos> then text, then BOI + image tokens + EOI, then AFTER
AFTER = [41, 77, 5]


def image(k):
    w, h, seed, _ = IMAGES[k]
    return vision_images.image(w, h, seed)


def sha256(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def write_mmproj(path, extra_kv=None):
    import make_gemma4_mmproj

    return make_gemma4_mmproj.write_mmproj(path, "tiny", ("vision",), "f32", SEED, PROJ_DIM, extra_kv)["vision"]
