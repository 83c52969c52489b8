"""Vision pipeline checks that need no llama.cpp:

  * resize: bin/vision_probe's Pillow-style resampling equals PIL.Image.resize of Pillow 13 bit for
    bit (bilinear, bicubic, lanczos; up, down and mixed; skipped without Pillow >= 13);
  * idefics3 preprocessing: the global image and tiles equal the transformers recipe run with
    PIL (longest edge, even rounding, stretch to whole 512-px tiles, crops, global resize);
  * idefics3 encoder: embeddings of every part equal a float64 numpy forward pass of the same
    random-weight mmproj (make_vlm_gguf.py) within 2e-3 of the largest magnitude.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_vlm_gguf as mk  # noqa: E402
import vision_images  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "vision_probe")

pytestmark = pytest.mark.skipif(not os.path.exists(PROBE), reason="bin/vision_probe not built")


def run_probe(*args):
    r = subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and "error" not in out, out
    return out


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return vision_images.write_all(str(tmp_path_factory.mktemp("images")))


@pytest.fixture(scope="module")
def idefics3(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gguf") / "idefics3_small.gguf")
    tensors = mk.write_idefics3_mmproj(path, mk.IDEFICS3_SMALL, seed=3)
    return path, tensors


def assert_pillow_close(ours, ref, what):
    """Bit-exact with Pillow 13 (which runs the vertical pass first when the height shrinks by more
    than twice as many pixels as the width); older Pillow always runs the horizontal pass first."""
    diff = np.abs(ours.astype(int) - ref.astype(int))
    assert diff.max() == 0, f"{what}: max {diff.max()}, {(diff > 0).mean():.3%} differ (Pillow {PIL_VERSION})"


def pillow_version():
    try:
        import PIL
        return tuple(int(x) for x in PIL.__version__.split(".")[:2])
    except ImportError:
        return None


PIL_VERSION = pillow_version()
needs_pillow13 = pytest.mark.skipif(PIL_VERSION is None or PIL_VERSION < (13, 0),
                                    reason="Pillow >= 13 (the pass order of its resize) not installed")


def load_rgb(path):
    from PIL import Image
    return Image.open(path).convert("RGB")


@needs_pillow13
@pytest.mark.parametrize("filt", ["bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("size", [(512, 512), (37, 101), (1024, 80), (5, 5)])
def test_resize_equals_pillow(images, tmp_path, filt, size):
    PIL = pytest.importorskip("PIL.Image")
    ref_filter = {"bilinear": PIL.BILINEAR, "bicubic": PIL.BICUBIC, "lanczos": PIL.LANCZOS}[filt]
    for path in images[:4] + images[6:7]:
        out = tmp_path / "out.rgb"
        run_probe("resize", path, size[0], size[1], filt, out)
        ours = np.fromfile(out, np.uint8).reshape(size[1], size[0], 3)
        ref = np.asarray(load_rgb(path).resize(size, ref_filter))
        assert_pillow_close(ours, ref, f"{path} -> {size} {filt}")


def idefics3_parts_pil(path, tile, longest_edge):
    """The transformers Idefics3ImageProcessor recipe with PIL (global image first, then tiles)."""
    from PIL import Image
    img = load_rgb(path)
    w, h = img.size
    aspect = w / h
    if w >= h:
        rw, rh = longest_edge, int(longest_edge / aspect)
        rh += rh % 2
    else:
        rw, rh = int(longest_edge * aspect), longest_edge
        rw += rw % 2
    gx, gy = -(-rw // tile), -(-rh // tile)
    refined = img.resize((rw, rh), Image.LANCZOS).resize((gx * tile, gy * tile), Image.LANCZOS)
    parts = [refined.resize((tile, tile), Image.LANCZOS)]
    for y in range(gy):
        for x in range(gx):
            parts.append(refined.crop((x * tile, y * tile, (x + 1) * tile, (y + 1) * tile)))
    return gx, gy, [np.asarray(p) for p in parts]


@needs_pillow13
def test_idefics3_tiles_equal_transformers_recipe(images, idefics3, tmp_path):
    pytest.importorskip("PIL.Image")
    path, _ = idefics3
    hp = mk.IDEFICS3_SMALL
    for img in images:
        meta = run_probe("encode", path, img, tmp_path / "out")
        gx, gy, parts = idefics3_parts_pil(img, hp["image_size"], hp["longest_edge"])
        assert (meta["grid_x"], meta["grid_y"], meta["parts"]) == (gx, gy, len(parts)), img
        ours = np.fromfile(tmp_path / "out.rgb", np.uint8).reshape(len(parts), hp["image_size"], hp["image_size"], 3)
        for i, ref in enumerate(parts):
            assert_pillow_close(ours[i], ref, f"{img} part {i}")


def test_idefics3_embeddings_equal_numpy(images, idefics3, tmp_path):
    path, tensors = idefics3
    hp = mk.IDEFICS3_SMALL
    side, s, p = hp["image_size"], hp["scale_factor"], hp["patch_size"]
    n_tok = (side // p // s) ** 2
    for img in images[:3] + images[-2:]:
        meta = run_probe("encode", path, img, tmp_path / "out", "--threads", 2)
        assert meta["tokens_per_part"] == n_tok and meta["n_embd"] == hp["proj_dim"]
        rgb = np.fromfile(tmp_path / "out.rgb", np.uint8).reshape(-1, side, side, 3)
        ours = np.fromfile(tmp_path / "out.f32", np.float32).reshape(len(rgb), n_tok, hp["proj_dim"])
        for i in range(len(rgb)):
            ref = mk.idefics3_encode_ref(tensors, hp, mk.normalize_planes(rgb[i]))
            err = np.abs(ours[i] - ref).max() / np.abs(ref).max()
            assert err < 2e-3, f"{img} part {i}: relative error {err:.2e}"
