"""Gemma 4's audio path against transformers' goldens (scripts/gemma4_audio_oracle.py, by hand in the torch
venv) and llama.cpp's libmtmd, on the tiny audio tower written by scripts/make_gemma4_mmproj.py
(--shape tiny --towers audio --type f32, the oracle's seed) and the clips of gemma4_audio_clips.py:

  * features: bin/gemma4_audio_probe's log-mel equals Gemma4AudioFeatureExtractor's valid frames within 1e-4
    absolute (log values of magnitude up to ~7; kissfft in float against numpy's double FFT: 4e-5 seen);
  * encoder: the tower's output and the embedder's rows within 1e-4 of the largest magnitude (1.2e-6 seen);
  * first token: the tiny text model (tests/models/gemma4_tiny.py) prefilled with <boa> rows <eoa> between
    text ids (F32 KV cache): KL(transformers || ours) <= 1e-4;
  * libmtmd: the same token count and rows within 1e-2 of the largest magnitude (4e-3 seen; docs/AUDIO.md);
  * bad input (no samples, more than 30 s, a NaN) is an error naming the problem.

    CACTUS_BUILD_DIR=$PWD/build ~/.cache/cactus/oracle/venv/bin/python -m pytest -q \\
        tests/models/audio/test_gemma4_audio_oracle.py
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
import gemma4_audio_clips as clips  # noqa: E402
import gemma4_tiny  # noqa: E402

BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "gemma4_audio_probe")
GOLDEN = os.path.join(REPO, "tests", "models", "data", "gemma4_audio_golden.npz")

pytestmark = pytest.mark.skipif(not os.path.exists(PROBE), reason="bin/gemma4_audio_probe not built")
gguf = pytest.importorskip("gguf")


def run_probe(*args, ok=True):
    r = subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if ok:
        assert r.returncode == 0 and "error" not in out, out
    return out


@pytest.fixture(scope="module")
def golden():
    return np.load(GOLDEN)


@pytest.fixture(scope="module")
def files(tmp_path_factory, golden):
    import make_gemma4_mmproj

    folder = tmp_path_factory.mktemp("gemma4a")
    mmproj, text = str(folder / "mmproj-audio-tiny.gguf"), str(folder / "text-tiny.gguf")
    make_gemma4_mmproj.write_mmproj(mmproj, "tiny", ("audio",), "f32", int(golden["seed"]), 128)
    gemma4_tiny.write_gguf(text)
    samples = clips.clips()
    assert clips.digest(samples) == str(golden["clips_sha256"]), "the clips differ from the oracle's (numpy changed?)"
    paths = []
    for k, x in enumerate(samples):
        path = str(folder / f"clip{k}.f32")
        x.tofile(path)
        paths.append(path)
    return {"mmproj": mmproj, "text": text, "clips": paths, "samples": samples, "folder": folder}


@pytest.fixture(scope="module")
def encoded(files):
    out = []
    for k, path in enumerate(files["clips"]):
        d = files["folder"] / f"enc{k}"
        d.mkdir()
        info = run_probe("encode", files["mmproj"], path, str(d), "--threads", 2)
        read = lambda name, width: np.fromfile(str(d / name), np.float32).reshape(-1, width)  # noqa: E731
        out.append((info, read("features.f32", 128), read("tower.f32", info["out_dim"]),
                    read("rows.f32", info["proj_dim"])))
    return out


@pytest.mark.parametrize("k", range(len(clips.LENGTHS)))
def test_features_equal_the_extractor(encoded, golden, k):
    ref = golden[f"features_{k}"]
    ours = encoded[k][1]
    assert ours.shape == ref.shape
    assert np.abs(ours - ref).max() <= 1e-4


@pytest.mark.parametrize("k", range(len(clips.LENGTHS)))
def test_encoder_matches_transformers(encoded, golden, k):
    info, _, tower, rows = encoded[k]
    assert info["tokens"] == golden[f"rows_{k}"].shape[0]
    for name, ours in (("tower", tower), ("rows", rows)):
        ref = golden[f"{name}_{k}"]
        assert ours.shape == ref.shape, name
        rel = np.abs(ours - ref).max() / np.abs(ref).max()
        assert rel <= 1e-4, f"clip {k} {name}: max |diff| / max |ref| = {rel:.2e}"


@pytest.mark.parametrize("k", range(len(clips.LENGTHS)))
def test_first_token_matches_transformers(files, golden, tmp_path, k):
    prompt = [int(t) for t in golden[f"prompt_{k}"]]
    boa, eoa = prompt[3], prompt[-3]  # <bos> t t <boa> <audio>*n <eoa> t t
    out = str(tmp_path / "logits.f32")
    info = run_probe("prefill", files["text"], files["mmproj"], files["clips"][k], out, "--before",
                     ",".join(map(str, prompt[:3])), "--after", ",".join(map(str, prompt[-2:])), "--boa", boa,
                     "--eoa", eoa, "--threads", 2)
    n_rows = golden[f"rows_{k}"].shape[0]
    assert info["tokens"] == prompt[:4] + [-1] * n_rows + prompt[-3:]
    logits = np.fromfile(out, np.float32).astype(np.float64)
    ref = golden[f"logits_{k}"].astype(np.float64)
    d = gemma4_tiny.kl(ref, logits)
    assert d <= 1e-4, f"KL(transformers || ours) = {d:.2e}"
    assert int(np.argmax(logits)) == int(np.argmax(ref))


def test_libmtmd_second_opinion(files, golden):
    pytest.importorskip("llama_cpp")
    import gemma4_mtmd_audio

    for k, x in enumerate(files["samples"]):
        chunks, _ = gemma4_mtmd_audio.mtmd_audio_chunks(files["text"], files["mmproj"], x)
        audio = [v for kind, v in chunks if kind == "audio"]
        assert len(audio) == 1
        ref = golden[f"rows_{k}"]
        assert audio[0].shape == ref.shape
        rel = np.abs(audio[0] - ref).max() / np.abs(ref).max()
        assert rel <= 1e-2, f"clip {k}: libmtmd differs from transformers by {rel:.2e} of the largest magnitude"


@pytest.mark.parametrize("samples,message", [
    (np.zeros(0, np.float32), "no samples"),
    (np.zeros(480001, np.float32), "longer than the 30 s"),
    (np.array([0.0] * 1000 + [np.nan] + [0.0] * 1000, np.float32), "sample 1000 is not a finite number"),
    (np.zeros(160, np.float32), "shorter than one 10 ms frame"),
])
def test_bad_input_is_an_error(files, tmp_path, samples, message):
    path = str(tmp_path / "bad.f32")
    samples.tofile(path)
    out = run_probe("encode", files["mmproj"], path, str(tmp_path), ok=False)
    assert message in out.get("error", ""), out
