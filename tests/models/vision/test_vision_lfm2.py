"""LFM2-VL images (projector type lfm2) against llama.cpp's libmtmd (llama-cpp-python 0.3.36), with a
random-weight lfm2 mmproj from make_vlm_gguf.py at LFM2-VL-450M's widths (SigLIP2 NaFlex 768 wide,
3072 FFN, 12 heads, one layer; 16 x 16 position grid; pixel unshuffle 2, layer norm, 3072 -> 2560 ->
1024 MLP) and a random F32 lfm2 text model at LFM2-350M's widths (4 layers) holding the markers:

  * preprocessing plan (single image or tiles, grid, thumbnail size) equals a transcription of
    transformers' Lfm2VlImageProcessor (smart_resize, _is_image_too_large, find_closest_aspect_ratio)
    on 400 sizes, half-to-even rounding ties included;
  * token layout: "<|image_start|>", per tile "<|img_row_Y_col_X|>" + tile, "<|img_thumbnail|>" +
    thumbnail, "<|image_end|>" (single images: start, image, end), equal to libmtmd's chunks;
  * image embeddings: every part within 1e-2 of the largest magnitude (libmtmd runs attention with
    F16 keys and values and the tanh GELU in the projector; transformers and we use erf);
  * tiling where llama.cpp and transformers differ (1024 x 768 -> a 3 x 2 grid of another aspect):
    transformers stretches the image to the grid, libmtmd letterboxes it (PAD_CEIL); so libmtmd is
    given our stretched grid and its tiles must then equal ours, and the original must not;
  * text side: first-token log-probabilities within KL 0.01 and greedy 16 tokens with the prompt
    prefilled in chunks of 50 tokens.
"""
import json
import math
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

HP = mk.LFM2_SMALL
TOLERANCE = 1e-2
# single: downscaled, tiny (upscaled to 64+ tokens, grid downscaled in height), portrait, at the
# token limit (64 x 16 patches); tiled: a grid of the image's own aspect (3 x 1), and 1024 x 768
# (3 x 2 grid of another aspect: where llama.cpp letterboxes).
SIZES = [(640, 480), (33, 17), (97, 389), (1024, 256), (1536, 512), (1024, 768)]
MISMATCHED = (1024, 768)


# ---- transformers' Lfm2VlImageProcessor planning, transcribed (transformers 5.24) ----------------

def tf_round_by_factor(number, factor):
    return round(number / factor) * factor


def tf_smart_resize(height, width, downsample_factor=2, min_image_tokens=64, max_image_tokens=256,
                    encoder_patch_size=16):
    total_factor = encoder_patch_size * downsample_factor
    min_pixels = min_image_tokens * encoder_patch_size ** 2 * downsample_factor ** 2
    max_pixels = max_image_tokens * encoder_patch_size ** 2 * downsample_factor ** 2
    h_bar = max(total_factor, tf_round_by_factor(height, total_factor))
    w_bar = max(total_factor, tf_round_by_factor(width, total_factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(total_factor, math.floor(height / beta / total_factor) * total_factor)
        w_bar = max(total_factor, math.floor(width / beta / total_factor) * total_factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / total_factor) * total_factor
        w_bar = math.ceil(width * beta / total_factor) * total_factor
    return w_bar, h_bar


def tf_is_image_too_large(height, width, max_image_tokens=256, encoder_patch_size=16, downsample_factor=2,
                          max_pixels_tolerance=2.0):
    total_factor = encoder_patch_size * downsample_factor
    h_bar = max(encoder_patch_size, tf_round_by_factor(height, total_factor))
    w_bar = max(encoder_patch_size, tf_round_by_factor(width, total_factor))
    return h_bar * w_bar > max_image_tokens * encoder_patch_size ** 2 * downsample_factor ** 2 * max_pixels_tolerance


def tf_grid(height, width, min_tiles=2, max_tiles=10, tile_size=512):
    ratios = sorted({(w, h) for n in range(min_tiles, max_tiles + 1) for w in range(1, n + 1)
                     for h in range(1, n + 1) if min_tiles <= w * h <= max_tiles}, key=lambda x: x[0] * x[1])
    aspect, area = width / height, width * height
    best_diff, best = float("inf"), (1, 1)
    for r in ratios:
        diff = abs(aspect - r[0] / r[1])
        if diff < best_diff:
            best_diff, best = diff, r
        elif diff == best_diff and area > 0.5 * tile_size * tile_size * r[0] * r[1]:
            best = r
    return best


def test_lfm2_plan_equals_transformers():
    rng = np.random.default_rng(3)
    sizes = [(int(w), int(h)) for w, h in rng.integers(1, 2500, size=(300, 2))]
    sizes += [(int(w), int(h)) for w, h in rng.integers(1, 40, size=(40, 2)) * 16]  # rounding ties
    sizes += [(80, 80), (48, 200), (1024, 512), (1024, 513), (725, 724), (2048, 64), (16, 3000), (1, 1)]
    sizes += [(int(w), 10000 // int(w)) for w in rng.integers(2, 200, size=52)]  # extreme aspect ratios
    out = json.loads(subprocess.run([PROBE, "lfm2-plan", *[str(v) for s in sizes for v in s]], capture_output=True,
                                    text=True, timeout=60, check=True).stdout)
    assert len(out) == len(sizes)
    for (w, h), plan in zip(sizes, out):
        tiled = tf_is_image_too_large(h, w)
        assert plan["tiled"] == tiled, (w, h, plan)
        assert tuple(plan["thumb"]) == tf_smart_resize(h, w), (w, h, plan)
        if tiled:
            assert tuple(plan["grid"]) == tf_grid(h, w), (w, h, plan)


# ---- against libmtmd ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("lfm2vl")
    mmproj, text = str(d / "mmproj.gguf"), str(d / "text.gguf")
    mk.write_lfm2_mmproj(mmproj, HP, seed=11)
    mk.write_lfm2_text(text)
    images = []
    for i, (w, h) in enumerate(SIZES):
        path = str(d / f"img{i}_{w}x{h}.png")
        vision_images.write_png(path, vision_images.image(w, h, i))
        images.append(path)
    return mmproj, text, images


def marker_ids(text):
    """Our layout's marker text ("<|...|>" specials, concatenated) -> ids of the test vocabulary."""
    sys.path.insert(0, os.path.dirname(HERE))  # tests/models
    from lfm2_synthetic import lfm2_vocab
    index = {t: i for i, t in enumerate(lfm2_vocab(mk.LFM2_SPECIALS)[0])}
    ids, i = [], 0
    while i < len(text):
        j = text.index("|>", i) + 2
        ids.append(index[text[i:j]])
        i = j
    return ids


def encode(mmproj, img, prefix):
    """(layout sequence with "image" for parts, part indices in layout order, embeddings per part,
    pixels per part) from vision_probe."""
    r = subprocess.run([PROBE, "encode", mmproj, img, str(prefix), "--threads", "2"], capture_output=True, text=True,
                       timeout=300)
    meta = json.loads(r.stdout)
    assert r.returncode == 0 and "error" not in meta, meta
    flat = np.fromfile(f"{prefix}.f32", np.float32).reshape(-1, HP["proj_dim"])
    rgb = np.fromfile(f"{prefix}.rgb", np.uint8)
    embd, pixels, row, px = [], [], 0, 0
    for (w, h), n in zip(meta["part_sizes"], meta["part_tokens"]):
        embd.append(flat[row:row + n])
        pixels.append(rgb[px:px + w * h * 3].reshape(h, w, 3))
        row, px = row + n, px + w * h * 3
    seq, parts = [], []
    for piece in meta["layout"]:
        if "text" in piece:
            seq += marker_ids(piece["text"])
        else:
            seq.append("image")
            parts.append(piece["part"])
    return seq, parts, embd, pixels, meta


def split_ref(ref):
    seq, embd = [], []
    for kind, v in ref:
        if kind == "text":
            seq += v
        else:
            seq.append("image")
            embd.append(v)
    return seq, embd


def rel_err(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_lfm2_matches_libmtmd(files, tmp_path):
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import mtmd_oracle
    mmproj, text, images = files
    worst = []
    for i, img in enumerate(images):
        w, h = SIZES[i]
        seq, parts, embd, pixels, meta = encode(mmproj, img, tmp_path / f"e{i}")
        ref_seq, ref_embd = split_ref(mtmd_oracle.mtmd_layout(text, mmproj, vision_images.image(w, h, i)))
        assert seq == ref_seq, f"{img}: layout {seq} != libmtmd {ref_seq}"
        if (w, h) == MISMATCHED:
            assert meta["grid_x"] == 3 and meta["grid_y"] == 2
            # The thumbnail (the same smart resize) agrees; the tiles do not: libmtmd letterboxed them.
            k = parts.index(0)
            worst.append(rel_err(embd[0], ref_embd[k]))
            assert worst[-1] < TOLERANCE, f"{img} thumbnail: {worst[-1]:.2e}"
            assert min(rel_err(embd[p], ref_embd[parts.index(p)]) for p in parts if p > 0) > 0.1
            # Given our stretched 1536 x 1024 grid, libmtmd cuts the same tiles (its grid resize is a copy).
            grid = np.concatenate([np.concatenate(pixels[1 + y * 3:4 + y * 3], axis=1) for y in range(2)], axis=0)
            assert grid.shape == (1024, 1536, 3)
            ref_seq2, ref_embd2 = split_ref(mtmd_oracle.mtmd_layout(text, mmproj, grid))
            assert ref_seq2 == ref_seq
            for p in parts:
                if p > 0:
                    worst.append(rel_err(embd[p], ref_embd2[parts.index(p)]))
                    assert worst[-1] < TOLERANCE, f"{img} tile {p} from our grid: {worst[-1]:.2e}"
            continue
        for k, p in enumerate(parts):
            assert ref_embd[k].shape == embd[p].shape, (img, p, ref_embd[k].shape, embd[p].shape)
            worst.append(rel_err(embd[p], ref_embd[k]))
            assert worst[-1] < TOLERANCE, f"{img} part {p}: relative error {worst[-1]:.2e}"
    print(f"lfm2 vs libmtmd: {len(worst)} parts, worst relative error {max(worst):.2e}")


def log_softmax(x):
    x = x.astype(np.float64) - x.max()
    return x - np.log(np.exp(x).sum())


def test_lfm2_generation_matches_llama_cpp(files, tmp_path):
    """First-token KL < 0.01 and greedy 16 tokens on the images both engines preprocess alike (one
    tiled), prompt prefilled in chunks of 50 (images span chunks)."""
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import mtmd_oracle
    mmproj, text, images = files
    same, kls, picked = 0, [], [0, 1, 4]
    for i in picked:
        w, h = SIZES[i]
        r = subprocess.run([PROBE, "generate", text, mmproj, images[i], tmp_path / "l.f32", "--chunk", "50",
                            "--threads", "2"], capture_output=True, text=True, timeout=300)
        out = json.loads(r.stdout)
        assert r.returncode == 0 and "error" not in out, out
        ours = np.fromfile(tmp_path / "l.f32", np.float32)
        ref, greedy = mtmd_oracle.mtmd_generate(text, mmproj, vision_images.image(w, h, i))
        p, q = log_softmax(ref), log_softmax(ours)
        kls.append(float((np.exp(p) * (p - q)).sum()))
        assert kls[-1] < 0.01, f"{images[i]}: KL {kls[-1]:.2e}"
        same += out["greedy"] == greedy
    print(f"lfm2 generation vs llama.cpp: worst KL {max(kls):.2e}, greedy 16 identical on {same}/{len(picked)}")
    assert same >= len(picked) - 1


LIBRARY = os.path.join(BUILD_DIR, "lib", "libcactus.so")
CLI = os.path.join(BUILD_DIR, "bin", "cactus")
GREEDY = {"max_tokens": 16, "temperature": 0, "min_p": 0, "repetition_penalty": 1.0, "ignore_eos": True,
          "auto_handoff": False}


@pytest.mark.skipif(not os.path.exists(LIBRARY) or not os.path.exists(CLI), reason="libcactus.so / cactus not built")
def test_lfm2_capi_and_cli_match_libmtmd(files, tmp_path):
    """The user-facing path on a folder holding both files: the C API's prompt length, text and
    confidence equal libmtmd's through the chat template, and `cactus run --mmproj --image` prints
    the C API's answer."""
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import shutil
    sys.path.insert(0, os.path.join(REPO, "python"))
    os.environ.setdefault("CACTUS_LIBRARY", LIBRARY)
    import cactus
    import mtmd_oracle
    mmproj, text, images = files
    d = tmp_path / "folder"
    d.mkdir()
    os.symlink(text, d / "text.gguf")
    shutil.copyfile(mmproj, d / "mmproj.gguf")
    os.environ.pop("CACTUS_MMPROJ", None)
    i = 0
    w, h = SIZES[i]
    messages = [{"role": "system", "content": "You are a helpful assistant."},  # `cactus run`'s default
                {"role": "user", "content": "Describe the image.", "images": [images[i]]}]
    with cactus.Model(str(d)) as model:
        prompt = model.render_prompt(messages)
        assert prompt.count("<__media__>") == 1, prompt
        r = model.complete(messages, GREEDY)
        # Second turn through the cached image rows (the conv state restored at the reuse point):
        # fewer rows prefilled and the answer a fresh handle gives.
        turn2 = messages + [{"role": "assistant", "content": r["response"]}, {"role": "user", "content": "More."}]
        again = model.complete(turn2, GREEDY)
        model.reset()
        fresh = model.complete(turn2, GREEDY)
        assert again["prefill_tokens"] < fresh["prefill_tokens"], (again, fresh)
        assert again["response"] == fresh["response"], (again["response"], fresh["response"])
    assert r["success"] and r["decode_tokens"] == 16, r
    n_past, greedy, answer, confidence = mtmd_oracle.mtmd_prompt_greedy(
        text, mmproj, prompt, [vision_images.image(w, h, i)], add_special=not prompt.startswith("<|startoftext|>"))
    assert r["prompt_tokens"] == n_past, (r["prompt_tokens"], n_past)
    assert r["response"] == answer, (r["response"], answer, greedy)
    assert abs(r["confidence"] - confidence) < 5e-4, (r["confidence"], confidence)
    cli = subprocess.run([CLI, "run", text, "--mmproj", mmproj, "--image", images[i], "-p", "Describe the image.",
                          "-n", "16", "--ignore-eos", "-t", "2"], capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == r["response"].strip(), (cli.stdout, r["response"])
    print(f"lfm2 C API vs libmtmd: {n_past} prompt positions, confidence {r['confidence']:.4f} vs {confidence:.4f}")


def test_lfm2_rounding_tie_follows_transformers(files, tmp_path):
    """1024 x 80: 80 / 32 = 2.5 rounds to 2 in transformers (Python's round) -> 1024 x 64 = 64 tokens;
    libmtmd's calc_size_preserved_ratio rounds half away from zero -> 1024 x 96 = 96 tokens. We follow
    transformers; the libmtmd count is checked so docs/VISION.md is revisited when it changes."""
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import mtmd_oracle
    mmproj, text, _ = files
    img = str(tmp_path / "tie.png")
    rgb = vision_images.image(1024, 80, 3)
    vision_images.write_png(img, rgb)
    _, parts, embd, pixels, meta = encode(mmproj, img, tmp_path / "t")
    assert tf_smart_resize(80, 1024) == (1024, 64)
    assert meta["part_sizes"] == [[1024, 64]] and meta["part_tokens"] == [64]
    _, ref_embd = split_ref(mtmd_oracle.mtmd_layout(text, mmproj, rgb))
    assert [e.shape[0] for e in ref_embd] == [96]
