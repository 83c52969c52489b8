"""Gemma 4 with an audio tower for the surface tests (C API, Python, CLI, serve): a folder holding the
reduced Gemma 4 text model (scripts/make_gemma4_gguf.py, written by scripts/test.sh; a symlink) and the
tiny mmproj of scripts/make_gemma4_mmproj.py (--proj-dim 256, the reduced model's width), plus WAV
clips written with the standard library. $CACTUS_GEMMA4_MMPROJ names an mmproj to use instead."""
import io
import math
import os
import struct
import subprocess
import sys
import wave

import pytest

from cactus_test_paths import model_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MMPROJ_SCRIPT = os.path.join(ROOT, "scripts", "make_gemma4_mmproj.py")


def text_model():
    return os.environ.get("CACTUS_GEMMA4_MODEL") or model_path("gemma4-reduced-q4_0")


def write_mmproj(path, towers):
    """The tiny Gemma 4 mmproj with `towers` ("audio", "vision,audio"); skips when the writer is missing."""
    given = os.environ.get("CACTUS_GEMMA4_MMPROJ")
    if given:
        if towers != "audio":
            pytest.skip("$CACTUS_GEMMA4_MMPROJ stands for the audio-only file")
        os.symlink(given, path)
        return path
    if not os.path.exists(MMPROJ_SCRIPT):
        pytest.skip("scripts/make_gemma4_mmproj.py is not in this tree (the vision helper's fixture writer)")
    subprocess.run([sys.executable, MMPROJ_SCRIPT, "--shape", "tiny", "--towers", towers,
                    "--proj-dim", "256", "-o", path], check=True, stdout=subprocess.DEVNULL, timeout=300)
    return path


def model_folder(tmp_path_factory, towers="audio"):
    """A folder the C API loads as a pair: the text model and its mmproj."""
    folder = tmp_path_factory.mktemp("gemma4_" + towers.replace(",", "_"))
    os.symlink(text_model(), str(folder / "gemma4-reduced.gguf"))
    write_mmproj(str(folder / "gemma4-mmproj.gguf"), towers)
    return str(folder)


def tone(seconds, rate=16000, freq=440.0):
    """A tone at half scale: [seconds * rate] float samples."""
    return [0.5 * math.sin(2 * math.pi * freq * i / rate) for i in range(int(seconds * rate))]


def pcm16(samples):
    return b"".join(struct.pack("<h", int(round(max(-1.0, min(1.0, s)) * 32767))) for s in samples)


def wav_bytes(samples, rate=16000, channels=1):
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16([s for s in samples for _ in range(channels)]))
    return buffer.getvalue()


def write_wav(path, samples, rate=16000, channels=1):
    with open(path, "wb") as f:
        f.write(wav_bytes(samples, rate, channels))
    return str(path)


def hostile_wavs(folder):
    """name -> path of hostile WAV files: each one the reader refuses with an error, except
    "huge-size" (a data chunk claiming 4 GiB over 0.5 s of samples), which it reads as far as it goes."""
    good = wav_bytes(tone(0.5))
    files = {
        "truncated": good[:30],                   # inside the header
        "zero-length": b"",
        "no-data": good[:44 - 8] + b"data" + struct.pack("<I", 0),  # a header and no samples
        "absurd-rate": good[:24] + struct.pack("<I", 2_000_000_000) + good[28:],
        "huge-size": good[:40] + struct.pack("<I", 0xFFFFFFF0) + good[44:],  # data claims 4 GiB
        "not-a-wav": b"RIFX" + os.urandom(60),
    }
    paths = {}
    for name, data in files.items():
        path = os.path.join(str(folder), name + ".wav")
        with open(path, "wb") as f:
            f.write(data)
        paths[name] = path
    return paths


def write_bmp(path, width, height):
    """A 24-bit BMP of a gradient (the image decoder takes BMP)."""
    stride = (width * 3 + 3) // 4 * 4
    rows = b"".join(bytes(v for x in range(width) for v in (x * 255 // width, y * 255 // height, 128))
                    + b"\0" * (stride - width * 3) for y in range(height))
    header = b"BM" + struct.pack("<IHHI", 54 + len(rows), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(rows), 2835, 2835, 0, 0)
    with open(path, "wb") as f:
        f.write(header + info + rows)
    return str(path)
