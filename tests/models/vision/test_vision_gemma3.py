"""Gemma 3 images (projector type gemma3) against llama.cpp's libmtmd (llama-cpp-python 0.3.36), with a
random-weight gemma3 mmproj from make_vlm_gguf.py at SigLIP-So400m's widths (1152 wide, 4304 FFN, 16
heads; one layer, 224 px -> 16 x 16 patches -> 4 x 4 pooled tokens) and two text models of width
640: a random-weight F32 gemma3 (6 layers, one global; llama.cpp and we agree to KL < 1e-5 on such
files, so the image path is compared sharply) and the real gemma3-270m (Q4_K: its own text-only
agreement with llama.cpp is KL ~0.005-0.03 per prompt, so it gets the layout and `cactus run`):

  * layout: "<start_of_image>" + image rows + "<end_of_image>", as libmtmd's chunks;
  * embeddings: within 1e-2 of the largest magnitude of libmtmd's (its clip attention runs in F16)
    and within 2e-3 of a float64 numpy forward pass (pool, soft-embedding norm, projection);
  * preprocessing: transformers' stretch to the square with Pillow's bilinear filter (libmtmd
    letterboxes non-square images instead: docs/VISION.md), so libmtmd is handed our square pixels;
    square inputs go to libmtmd as they are and must agree too (same resize);
  * text side: first-token log-probabilities within KL 0.01 and greedy 16 tokens, with the image's
    rows attending to each other (libmtmd decodes an image non-causally); any prefill chunk size
    gives the same logits, and a causal prefill of the image rows does not (the control);
  * the C API ("images") gives libmtmd's prompt length, text and confidence; a prefill chunk
    smaller than the image and a second turn through the cached image give the same answer;
  * gemma3-270m: the C API's prompt length equals libmtmd's and `cactus run --mmproj --image` prints
    the C API's answer.
"""
import json
import os
import shutil
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
LIBRARY = os.path.join(BUILD_DIR, "lib", "libcactus.so")
CLI = os.path.join(BUILD_DIR, "bin", "cactus")
TEXT = os.path.join(os.path.expanduser(os.environ.get("CACTUS_MODELS", "~/.cache/cactus/models")), "gemma3-270m.gguf")
sys.path.insert(0, os.path.join(REPO, "python"))
os.environ.setdefault("CACTUS_LIBRARY", LIBRARY)

pytestmark = [pytest.mark.skipif(not os.path.exists(PROBE), reason="bin/vision_probe not built"),
              pytest.mark.skipif(not os.path.exists(TEXT), reason="gemma3-270m.gguf not pulled")]

HP = mk.GEMMA3_SMALL
START, END = 255999, 256000  # gemma3-270m's <start_of_image>, <end_of_image>
_TOKENS = mk.text_vocab(mk.GEMMA3_SPECIALS)[0]
R_START, R_END = _TOKENS.index("<start_of_image>"), _TOKENS.index("<end_of_image>")  # the random vocab
SIZES = [(224, 224), (640, 480), (97, 389), (300, 300)]  # exact, landscape, portrait, square (resized)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemma3")
    mmproj = str(d / "mmproj.gguf")
    tensors = mk.write_gemma3_mmproj(mmproj, HP, seed=7)
    mk.write_gemma3_text(str(d / "text.gguf"))
    images = []
    for i, (w, h) in enumerate(SIZES):
        path = str(d / f"img{i}_{w}x{h}.png")
        vision_images.write_png(path, vision_images.image(w, h, i))
        images.append(path)
    return mmproj, tensors, images


def probe(*args):
    r = subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and "error" not in out, out
    return out


def encode(mmproj, img, prefix):
    """Our square pixels [side, side, 3] and embeddings [tokens, 640] of one image."""
    meta = probe("encode", mmproj, img, prefix, "--threads", 2)
    side, n_tok = meta["side"], meta["tokens_per_part"]
    assert meta["parts"] == 1 and side == HP["image_size"] and meta["n_embd"] == HP["proj_dim"]
    assert meta["layout"] == [{"text": "<start_of_image>"}, {"part": 0}, {"text": "<end_of_image>"}]
    rgb = np.fromfile(f"{prefix}.rgb", np.uint8).reshape(side, side, 3)
    return rgb, np.fromfile(f"{prefix}.f32", np.float32).reshape(n_tok, HP["proj_dim"])


def test_average_pool_and_projection_equal_numpy(files, tmp_path):
    mmproj, tensors, images = files
    side = HP["image_size"] // HP["patch_size"]
    k = HP["scale_factor"]
    rgb, ours = encode(mmproj, images[0], tmp_path / "a")
    assert ours.shape == ((side // k) ** 2, HP["proj_dim"])
    ref = mk.gemma3_encode_ref(tensors, HP, mk.normalize_planes(rgb))
    err = np.abs(ours - ref).max() / np.abs(ref).max()
    # The pooling alone: a constant-per-block grid pools to the block values.
    grid = np.repeat(np.repeat(np.arange(16.0).reshape(4, 4), k, 0), k, 1).reshape(-1, 1)
    assert np.array_equal(mk.average_pool_ref(grid, 4 * k, 4 * k, k).ravel(), np.arange(16.0))
    print(f"gemma3 vs numpy float64: relative error {err:.2e}")
    assert err < 2e-3, err


def test_gemma3_matches_libmtmd(files, tmp_path):
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import mtmd_oracle
    mmproj, _, images = files
    errs = []
    for i, img in enumerate(images):
        rgb, ours = encode(mmproj, img, tmp_path / f"e{i}")
        w, h = SIZES[i]
        # Square inputs: libmtmd resizes the original as we do. Others: it letterboxes, so it gets our
        # stretched square (transformers' preprocessing) and must then agree on everything after it.
        given = vision_images.image(w, h, i) if w == h else rgb
        ref = mtmd_oracle.mtmd_layout(TEXT, mmproj, given)
        assert [k for k, _ in ref] == ["text", "image", "text"], [k for k, _ in ref]
        assert ref[0][1] == [START] and ref[2][1] == [END], (ref[0][1], ref[2][1])
        emb = ref[1][1]
        assert emb.shape == ours.shape
        err = np.abs(ours - emb).max() / np.abs(emb).max()
        errs.append(err)
        assert err < 1e-2, f"{img}: relative error {err:.2e}"
    print(f"gemma3 embeddings vs libmtmd: worst relative error {max(errs):.2e} over {len(errs)} images")


def log_softmax(x):
    x = x.astype(np.float64) - x.max()
    return x - np.log(np.exp(x).sum())


def random_text(mmproj):
    return os.path.join(os.path.dirname(mmproj), "text.gguf")


def generate(mmproj, img, out, chunk, causal=False, n=16):
    res = probe("generate", random_text(mmproj), mmproj, img, out, "--chunk", chunk, "--n", n, "--threads", 2,
                "--causal", int(causal))
    return res, np.fromfile(out, np.float32)


def test_generation_matches_llama_cpp(files, tmp_path):
    """The image's prompt (no BOS) prefilled in chunks of 5 (the image is then one step of its own)
    against libmtmd's helper (the image as one non-causal batch)."""
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import mtmd_oracle
    mmproj, _, images = files
    kls, same = [], 0
    for i, img in enumerate(images[:3]):
        rgb, _ = encode(mmproj, img, tmp_path / f"g{i}")
        res, ours = generate(mmproj, img, tmp_path / "l.f32", 5)
        assert res["tokens"] == [R_START] + [-1] * 16 + [R_END]
        first, greedy = mtmd_oracle.mtmd_generate(random_text(mmproj), mmproj, rgb)
        p, q = log_softmax(first), log_softmax(ours)
        kl = float((np.exp(p) * (p - q)).sum())
        kls.append(kl)
        assert kl < 0.01, f"{img}: KL {kl:.2e}"
        same += res["greedy"] == greedy
    print(f"gemma3 generation vs llama.cpp: worst KL {max(kls):.2e}, greedy 16 identical on {same}/3")
    assert max(kls) < 1e-4 and same >= 2


def test_image_rows_are_bidirectional_for_any_chunk(files, tmp_path):
    mmproj, _, images = files
    logits = {}
    for chunk in (1, 5, 7, 0):
        _, logits[chunk] = generate(mmproj, images[1], tmp_path / f"c{chunk}.f32", chunk, n=1)
    _, causal = generate(mmproj, images[1], tmp_path / "causal.f32", 0, causal=True, n=1)
    scale = np.abs(logits[0]).max()
    for chunk in (1, 5, 7):
        assert np.abs(logits[chunk] - logits[0]).max() < 1e-3 * scale, chunk
    p, q = log_softmax(logits[0]), log_softmax(causal)
    kl = float((np.exp(p) * (p - q)).sum())
    print(f"bidirectional vs causal image rows: KL {kl:.3e}")
    assert kl > 100 * 1e-5, "a causal prefill of the image must differ (else the test sees no attention change)"
    # A step too small for the image is refused with a clear error, never split silently.
    r = subprocess.run([PROBE, "generate", random_text(mmproj), mmproj, images[1], tmp_path / "x.f32", "--n-batch", "8", "--n", "1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "raise n_batch" in r.stdout, r.stdout


SQUARES = [(300, 300), (224, 224)]
GREEDY = {"max_tokens": 16, "temperature": 0, "min_p": 0, "repetition_penalty": 1.0, "ignore_eos": True,
          "auto_handoff": False}


@pytest.fixture(scope="module")
def folder(files, tmp_path_factory):
    d = tmp_path_factory.mktemp("gemma3_folder")
    shutil.copyfile(random_text(files[0]), d / "text.gguf")
    shutil.copyfile(files[0], d / "mmproj.gguf")
    paths, rgbs = [], []
    for i, (w, h) in enumerate(SQUARES):
        rgb = vision_images.image(w, h, 10 + i)
        paths.append(str(d / f"sq{i}.png"))
        vision_images.write_png(paths[-1], rgb)
        rgbs.append(rgb)
    return str(d), paths, rgbs


@pytest.mark.skipif(not os.path.exists(LIBRARY), reason="lib/libcactus.so not built")
def test_capi_matches_libmtmd(folder):
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import cactus
    import mtmd_oracle
    d, paths, rgbs = folder
    os.environ.pop("CACTUS_MMPROJ", None)
    answers = []
    with cactus.Model(d) as model:
        for path, rgb in zip(paths, rgbs):
            messages = [{"role": "user", "content": "Describe the image.", "images": [path]}]
            model.reset()
            prompt = model.render_prompt(messages)
            assert prompt.count("<__media__>") == 1, prompt
            r = model.complete(messages, GREEDY)
            assert r["success"], r
            n_past, greedy, text, confidence = mtmd_oracle.mtmd_prompt_greedy(
                os.path.join(d, "text.gguf"), os.path.join(d, "mmproj.gguf"), prompt, [rgb],
                add_special=not prompt.startswith(("<s>", "<bos>")))
            assert r["prompt_tokens"] == n_past, (r["prompt_tokens"], n_past)
            assert r["response"].strip() == text.strip(), (r["response"], text, greedy)
            assert abs(r["confidence"] - confidence) < 5e-4, (r["confidence"], confidence)
            answers.append(r["response"])
        # A prefill chunk smaller than the image (the image still prefilled whole): the same answer.
        model.reset()
        small = model.complete([{"role": "user", "content": "Describe the image.", "images": [paths[0]]}],
                               dict(GREEDY, prefill_chunk=5))
        assert small["success"] and small["response"] == answers[0], (small, answers[0])
        # Second turn: the image rows come from the cache and the answer equals a fresh handle's.
        turn2 = [{"role": "user", "content": "Describe the image.", "images": [paths[0]]},
                 {"role": "assistant", "content": answers[0]}, {"role": "user", "content": "More."}]
        model.reset()
        model.complete(turn2[:1], GREEDY)
        again = model.complete(turn2, GREEDY)
        model.reset()
        fresh = model.complete(turn2, GREEDY)
        assert again["prefill_tokens"] < fresh["prefill_tokens"] and again["response"] == fresh["response"]
    print("gemma3 C API vs libmtmd:", answers)


@pytest.mark.skipif(not os.path.exists(LIBRARY) or not os.path.exists(CLI), reason="libcactus.so / cactus not built")
def test_gemma3_270m_capi_and_cli(folder, tmp_path):
    """The real text model: the prompt layout (length) equals libmtmd's and `cactus run` prints the C
    API's answer."""
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import cactus
    import mtmd_oracle
    d, paths, rgbs = folder
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(TEXT, real / "text.gguf")
    shutil.copyfile(os.path.join(d, "mmproj.gguf"), real / "mmproj.gguf")
    os.environ.pop("CACTUS_MMPROJ", None)
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Describe the image.", "images": [paths[0]]}]
    with cactus.Model(str(real)) as model:
        prompt = model.render_prompt(messages)
        r = model.complete(messages, GREEDY)
    assert r["success"] and r["decode_tokens"] == 16, r
    n_past, _, text, _ = mtmd_oracle.mtmd_prompt_greedy(TEXT, str(real / "mmproj.gguf"), prompt, [rgbs[0]],
                                                       add_special=not prompt.startswith("<bos>"))
    assert r["prompt_tokens"] == n_past, (r["prompt_tokens"], n_past)
    print("gemma3-270m: ours", repr(r["response"]), "llama.cpp", repr(text))
    cli = subprocess.run([CLI, "run", str(real / "text.gguf"), "--mmproj", str(real / "mmproj.gguf"), "--image",
                          paths[0], "-p", "Describe the image.", "-n", "16", "--ignore-eos", "-t", "2"],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == r["response"].strip(), (cli.stdout, r["response"])
