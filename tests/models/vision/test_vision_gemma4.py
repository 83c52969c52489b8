"""Gemma 4 vision (gemma4v) against transformers' goldens (scripts/gemma4_vision_oracle.py wrote
tests/models/data/gemma4_vision_golden.npz) and llama.cpp's libmtmd, no torch:

  * the tiny mmproj is regenerated (make_gemma4_mmproj.py --shape tiny --type f32) and the images
    (gemma4_vision_fixture.IMAGES) are rebuilt and checked against the golden hashes;
  * preprocessing: bin/vision_probe's resized image equals Gemma4ImageProcessor's, byte for byte
    (aspect-preserving bicubic + antialias to multiples of 48 in the soft-token budget);
  * encoder: tower + embedder output within 1e-4 of transformers (max |diff| / max |ref|);
  * text: first-token logits of a prompt with an image (tests/models/gemma4_tiny.py, PLE of the image
    rows from the pad token, F32 KV cache) within KL 1e-4 and 1e-3 of the largest logit of
    Gemma4ForConditionalGeneration;
  * libmtmd on the same files, for the image already at its processor size (480x336 at 70 tokens:
    both see the same pixels): llama.cpp 0.3.36 runs the converter's file with quick GELU (the
    converter writes no clip.use_gelu for Gemma 4, and clip.cpp's default is gelu_quick), 1e-2 away;
    with clip.use_gelu added it agrees within 2e-3 (its GELU goes through an f16 table).
"""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gemma4_vision_fixture as fx  # noqa: E402
import vision_images  # noqa: E402
import gemma4_tiny  # noqa: E402

REPO = fx.REPO
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "vision_probe")
GOLDEN = os.path.join(REPO, "tests", "models", "data", "gemma4_vision_golden.npz")
LIBMTMD_IMAGE = 2

pytestmark = pytest.mark.skipif(not os.path.exists(PROBE), reason="bin/vision_probe not built")
gguf = pytest.importorskip("gguf")


def run_probe(*args):
    r = subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and "error" not in out, out
    return out


@pytest.fixture(scope="module")
def golden():
    return np.load(GOLDEN)


@pytest.fixture(scope="module")
def files(tmp_path_factory, golden):

    folder = tmp_path_factory.mktemp("gemma4v")
    mmproj, text = str(folder / "mmproj-tiny.gguf"), str(folder / "text-tiny.gguf")
    fx.write_mmproj(mmproj)
    gemma4_tiny.write_gguf(text)
    images = []
    for k in range(len(fx.IMAGES)):
        rgb = fx.image(k)
        assert fx.sha256(rgb) == str(golden[f"image{k}_sha"]), f"image {k} differs from the oracle's (numpy changed?)"
        path = str(folder / f"image{k}.png")
        vision_images.write_png(path, rgb)
        images.append(path)
    return {"mmproj": mmproj, "text": text, "images": images, "folder": folder}


@pytest.fixture(scope="module")
def encoded(files):
    out = []
    for k, (_, _, _, budget) in enumerate(fx.IMAGES):
        prefix = str(files["folder"] / f"enc{k}")
        info = run_probe("encode", files["mmproj"], files["images"][k], prefix, "--max-tokens", budget, "--threads", 2)
        rgb = np.fromfile(prefix + ".rgb", np.uint8)
        embd = np.fromfile(prefix + ".f32", np.float32).reshape(-1, fx.PROJ_DIM)
        out.append((info, rgb, embd))
    return out


@pytest.mark.parametrize("k", range(len(fx.IMAGES)))
def test_pixels_equal_the_processor(encoded, golden, k):
    info, rgb, _ = encoded[k]
    assert info["part_sizes"] == [list(map(int, golden[f"image{k}_resized_size"]))]
    assert info["layout"] == [{"text": "<|image>"}, {"part": 0}, {"text": "<image|>"}]
    assert hashlib.sha256(rgb.tobytes()).hexdigest() == str(golden[f"image{k}_resized_sha"])


@pytest.mark.parametrize("k", range(len(fx.IMAGES)))
def test_encoder_matches_transformers(encoded, golden, k):
    ref = golden[f"image{k}_embd"]
    ours = encoded[k][2]
    assert ours.shape == ref.shape
    rel = np.abs(ours - ref).max() / np.abs(ref).max()
    assert rel <= 1e-4, f"image {k}: max |diff| / max |ref| = {rel:.2e}"


def test_first_token_matches_transformers(files, golden, tmp_path):
    k = fx.LOGITS_IMAGE
    out = str(tmp_path / "logits.f32")
    info = run_probe("gemma4-prefill", files["text"], files["mmproj"], files["images"][k], out,
                     "--before", ",".join(map(str, fx.BEFORE)), "--after", ",".join(map(str, fx.AFTER)),
                     "--boi", fx.BOI, "--eoi", fx.EOI, "--max-tokens", fx.IMAGES[k][3], "--threads", 2)
    n_rows = golden[f"image{k}_embd"].shape[0]
    assert info["tokens"] == fx.BEFORE + [fx.BOI] + [-1] * n_rows + [fx.EOI] + fx.AFTER
    logits = np.fromfile(out, np.float32)
    d = gemma4_tiny.kl(golden["logits"].astype(np.float64), logits.astype(np.float64))
    assert d <= 1e-4, f"KL(transformers || ours) = {d:.2e}"
    worst = float(np.abs(logits - golden["logits"]).max())  # about 1e-5 with the F32 cache
    assert worst <= 1e-3 * float(np.abs(golden["logits"]).max()), f"logits differ by up to {worst:.2e}"
    assert int(np.argmax(logits)) == int(np.argmax(golden["logits"]))


@pytest.mark.parametrize("use_gelu,bound", [(False, 3e-2), (True, 2e-3)])
def test_libmtmd_second_opinion(files, encoded, use_gelu, bound):
    """libmtmd keeps an image inside its 70..1120-token range at its size (transformers resizes to
    the budget), so only the image already at the processor's size is compared."""
    pytest.importorskip("llama_cpp")
    import mtmd_oracle

    mmproj = files["mmproj"]
    if use_gelu:
        mmproj = str(files["folder"] / "mmproj-tiny-use-gelu.gguf")
        fx.write_mmproj(mmproj, {"clip.use_gelu": True})
    k = LIBMTMD_IMAGE
    chunks = mtmd_oracle.mtmd_layout(files["text"], mmproj, fx.image(k))
    theirs = [c[1] for c in chunks if c[0] == "image"]
    assert len(theirs) == 1
    ours = encoded[k][2]
    assert theirs[0].shape == ours.shape
    rel = np.abs(ours - theirs[0]).max() / np.abs(theirs[0]).max()
    assert rel <= bound, f"libmtmd (clip.use_gelu {use_gelu}): max |diff| / max |ref| = {rel:.2e}"
