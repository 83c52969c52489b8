"""Idefics3 (SmolVLM) against llama.cpp's libmtmd (llama-cpp-python 0.3.36) on the same random-weight
text + mmproj GGUFs (make_vlm_gguf.py, small widths, real 512-px geometry) and 10 images of varied
sizes and aspect ratios (vision_images.py):

  * token layout: the marker tokens around and between the image parts equal libmtmd's chunks;
  * image embeddings: every part within 1e-2 of the largest magnitude (llama.cpp's clip runs its
    attention with F16 keys and values: flash attention);
  * preprocessing where libmtmd and transformers differ is stated in docs/VISION.md; the small
    configuration used here (longest edge 1024) needs no vertical-first resize, so pixels agree.
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

pytest.importorskip("llama_cpp.mtmd_cpp")
pytestmark = pytest.mark.skipif(not os.path.exists(PROBE), reason="bin/vision_probe not built")
import mtmd_oracle  # noqa: E402

TOLERANCE = 1e-2


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("idefics3")
    mmproj, text = str(d / "mmproj.gguf"), str(d / "text.gguf")
    mk.write_idefics3_mmproj(mmproj, mk.IDEFICS3_SMALL, seed=5)
    mk.write_llama_text(text, mk.IDEFICS3_SMALL["proj_dim"], mk.IDEFICS3_SPECIALS)
    images = vision_images.write_all(str(d))
    return mmproj, text, images


def marker_ids(text):
    """Our layout's marker text -> token ids of the test vocabulary (specials, "\\n\\n", byte "\\n")."""
    tokens, _, _ = mk.text_vocab(mk.IDEFICS3_SPECIALS)
    index = {t: i for i, t in enumerate(tokens)}
    ids, i = [], 0
    while i < len(text):
        if text.startswith("\n\n", i):
            ids.append(index["\n\n"])
            i += 2
        elif text[i] == "\n":
            ids.append(index["<0x0A>"])
            i += 1
        else:
            j = text.index(">", i) + 1
            ids.append(index[text[i:j]])
            i = j
    return ids


def test_idefics3_matches_libmtmd(files, tmp_path):
    mmproj, text, images = files
    hp = mk.IDEFICS3_SMALL
    side = hp["image_size"]
    worst = []
    for img in images:
        meta = json.loads(subprocess.run([PROBE, "encode", mmproj, img, tmp_path / "out", "--threads", "2"],
                                         capture_output=True, text=True, timeout=300, check=True).stdout)
        n_tok, n_embd = meta["tokens_per_part"], meta["n_embd"]
        ours = np.fromfile(tmp_path / "out.f32", np.float32).reshape(meta["parts"], n_tok, n_embd)
        rgb = vision_images.image(*[int(v) for v in os.path.basename(img).split("_")[1][:-4].split("x")],
                                  images.index(img))
        ref = mtmd_oracle.mtmd_layout(text, mmproj, rgb)
        # Layout: flatten both into ids and ("image", k) in order.
        seq_ours, parts_ours = [], []
        for piece in meta["layout"]:
            if "text" in piece:
                seq_ours += marker_ids(piece["text"])
            else:
                seq_ours.append("image")
                parts_ours.append(piece["part"])
        seq_ref, embd_ref = [], []
        for kind, v in ref:
            if kind == "text":
                seq_ref += v
            else:
                seq_ref.append("image")
                embd_ref.append(v)
        assert seq_ours == seq_ref, f"{img}: layout {seq_ours} != libmtmd {seq_ref}"
        for k, part in enumerate(parts_ours):
            assert embd_ref[k].shape == (n_tok, n_embd), (img, k, embd_ref[k].shape)
            err = np.abs(ours[part] - embd_ref[k]).max() / np.abs(embd_ref[k]).max()
            worst.append(err)
            assert err < TOLERANCE, f"{img} part {part}: relative error {err:.2e}"
        assert side == meta["side"]
    print(f"idefics3 vs libmtmd: {len(worst)} parts, worst relative error {max(worst):.2e}")


def log_softmax(x):
    x = x.astype(np.float64) - x.max()
    return x - np.log(np.exp(x).sum())


def test_idefics3_generation_matches_llama_cpp(files, tmp_path):
    """First-token log-probabilities within KL 0.01 and greedy 16 tokens on most images, with the
    prompt prefilled in chunks of 50 tokens (images span chunks, no padding) on our side and
    libmtmd's helper (one batch per image part) on llama.cpp's."""
    mmproj, text, images = files
    same, kls = 0, []
    for i, img in enumerate(images):
        w, h = [int(v) for v in os.path.basename(img).split("_")[1][:-4].split("x")]
        out = json.loads(subprocess.run([PROBE, "generate", text, mmproj, img, tmp_path / "l.f32", "--chunk", "50",
                                         "--threads", "2"], capture_output=True, text=True, timeout=300,
                                        check=True).stdout)
        ours = np.fromfile(tmp_path / "l.f32", np.float32)
        ref, greedy = mtmd_oracle.mtmd_generate(text, mmproj, vision_images.image(w, h, i))
        p, q = log_softmax(ref), log_softmax(ours)
        kl = float((np.exp(p) * (p - q)).sum())
        kls.append(kl)
        assert kl < 0.01, f"{img}: KL {kl:.2e}"
        same += out["greedy"] == greedy
    print(f"idefics3 generation vs llama.cpp: worst KL {max(kls):.2e}, greedy 16 identical on {same}/{len(images)}")
    assert same >= 8


def test_chunking_does_not_change_logits(files, tmp_path):
    mmproj, text, images = files
    logits = []
    for chunk in ("7", "64", "0"):
        subprocess.run([PROBE, "generate", text, mmproj, images[2], tmp_path / "l.f32", "--chunk", chunk, "--n", "1"],
                       capture_output=True, text=True, timeout=300, check=True)
        logits.append(np.fromfile(tmp_path / "l.f32", np.float32))
    for other in logits[:-1]:
        assert np.abs(other - logits[-1]).max() < 1e-3 * np.abs(logits[-1]).max()
