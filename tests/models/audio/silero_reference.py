"""Silero VAD v6 in numpy from the wheel's silero_vad_16k.safetensors (the same network as the
package's tinygrad_model.py): the scalar reference for our C++ (src/models/audio/silero_vad.cpp)."""
import glob
import json
import os
import struct
import subprocess
import sys
import zipfile

import numpy as np

DL_DIR = os.path.expanduser("~/.cache/cactus/dl/whisper")


def wheel():
    """The silero-vad 6.2.3 wheel, downloaded once into DL_DIR (`cactus pull` keeps only the GGUF)."""
    pattern = os.path.join(DL_DIR, "silero_vad-6.2.3-*.whl")
    if not glob.glob(pattern):
        os.makedirs(DL_DIR, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
                        "--only-binary", ":all:", "-d", DL_DIR, "silero-vad==6.2.3"], check=True)
    found = glob.glob(pattern)
    assert found, f"silero_vad wheel missing in {DL_DIR} after pip download"
    return found[0]


def weights():
    blob = zipfile.ZipFile(wheel()).read("silero_vad/data/silero_vad_16k.safetensors")
    n = struct.unpack_from("<Q", blob, 0)[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for k, v in header.items():
        if k != "__metadata__":
            a, b = v["data_offsets"]
            out[k] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype=np.float32).reshape(v["shape"])
    return out


def _conv(x, w, b, stride, pad):
    x = np.pad(x, ((0, 0), (pad, pad)))
    k = w.shape[2]
    steps = (x.shape[1] - k) // stride + 1
    y = np.stack([np.einsum("oik,ik->o", w, x[:, t * stride:t * stride + k]) for t in range(steps)], axis=1)
    return y + (b[:, None] if b is not None else 0)


def probabilities(audio):
    W = weights()
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    a = np.pad(audio.astype(np.float32), (0, 512 - audio.shape[0] % 512))
    h = np.zeros(128, np.float32)
    c = np.zeros(128, np.float32)
    ctx = np.zeros(64, np.float32)
    out = []
    for i in range(0, len(a), 512):
        x = np.pad(np.concatenate([ctx, a[i:i + 512]]), (0, 64), mode="reflect")[None]
        ctx = a[i + 512 - 64:i + 512]
        s = _conv(x, W["stft_conv.weight"], None, 128, 0)
        y = np.sqrt(s[:129] ** 2 + s[129:] ** 2)
        for name, stride in (("conv1", 1), ("conv2", 2), ("conv3", 2), ("conv4", 1)):
            y = np.maximum(_conv(y, W[name + ".weight"], W[name + ".bias"], stride, 1), 0)
        y = y[:, 0]
        g = W["lstm_cell.weight_ih"] @ y + W["lstm_cell.bias_ih"] + W["lstm_cell.weight_hh"] @ h + W["lstm_cell.bias_hh"]
        c = sig(g[128:256]) * c + sig(g[:128]) * np.tanh(g[256:384])
        h = sig(g[384:]) * np.tanh(c)
        out.append(sig(W["final_conv.weight"][0, :, 0] @ np.maximum(h, 0) + W["final_conv.bias"][0]))
    return np.array(out, dtype=np.float32)
