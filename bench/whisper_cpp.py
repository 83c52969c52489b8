#!/usr/bin/env python3
"""whisper.cpp as a speed peer for bench/compare_whisper.py, on the same weights.

  build()            builds whisper.cpp's `whisper-cli` once from the pywhispercpp sdist on PyPI
                     (native CPU flags) into $CACTUS_WHISPER_CPP_DIR (default
                     ~/.cache/cactus/whisper-cpp); never committed, never shipped.
  convert(gguf, out) writes whisper.cpp's ggml model file from a cactus Whisper GGUF (the one
                     `cactus pull` converts from the CTranslate2 wheel): the same fp16 weights,
                     renamed to OpenAI's names, fused QKV / KV split back, the byte-level BPE
                     vocabulary turned back into bytes. Cached beside the GGUF's name.
  rtf(model, wav, threads, beam_size)
                     (total - load) / audio seconds as whisper.cpp prints them: temperature 0 only
                     (no fallback), greedy (best of 1) or beam search, no timestamps, passive
                     OpenMP waits.

By hand: python3 bench/whisper_cpp.py MODEL.gguf AUDIO.wav [threads]  (needs numpy and gguf).
"""
import os
import re
import struct
import subprocess
import sys
import wave

VERSION = os.environ.get("PYWHISPERCPP_VERSION", "1.5.1")
CACHE = os.environ.get("CACTUS_WHISPER_CPP_DIR", os.path.expanduser("~/.cache/cactus/whisper-cpp"))
GGML_MAGIC = 0x67676D6C


def build():
    """Path of whisper-cli, built once from the sdist's whisper.cpp sources."""
    binary = os.path.join(CACHE, f"bin-{VERSION}", "whisper-cli")
    if os.access(binary, os.X_OK):
        return binary
    os.makedirs(CACHE, exist_ok=True)
    src = os.path.join(CACHE, f"pywhispercpp-{VERSION}", "whisper.cpp")
    if not os.path.isfile(os.path.join(src, "CMakeLists.txt")):
        sdist = os.path.join(CACHE, f"pywhispercpp-{VERSION}.tar.gz")
        if not os.path.isfile(sdist):  # only this package from source: its build tools stay wheels
            subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
                            "--no-binary", "pywhispercpp", f"pywhispercpp=={VERSION}", "-d", CACHE], check=True)
        subprocess.run(["tar", "-xzf", sdist, "-C", CACHE], check=True)
    work = os.path.join(CACHE, f"build-{VERSION}")
    subprocess.run(["cmake", "-S", src, "-B", work, "-DCMAKE_BUILD_TYPE=Release", "-DWHISPER_BUILD_TESTS=OFF",
                    "-DWHISPER_SDL2=OFF", "-DWHISPER_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=ON"],
                   check=True, stdout=subprocess.DEVNULL)
    jobs = os.environ.get("CACTUS_BUILD_JOBS", str(os.cpu_count() or 2))
    subprocess.run(["cmake", "--build", work, "--target", "whisper-cli", "-j", jobs], check=True,
                   stdout=subprocess.DEVNULL)
    os.makedirs(os.path.dirname(binary), exist_ok=True)
    os.replace(os.path.join(work, "bin", "whisper-cli"), binary)
    return binary


def byte_decoder():
    """GPT-2's byte-level BPE alphabet, inverted: printable character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes(token, decoder):
    if all(ch in decoder for ch in token):
        return bytes(decoder[ch] for ch in token)
    return token.encode("utf-8")


def ggml_tensors(t, n_enc, n_dec):
    """(OpenAI name, array) pairs from the cactus GGUF tensors `t` (name -> numpy array)."""
    def qkv(prefix, fused_w, fused_b, parts):
        w, b = t[fused_w], t[fused_b]
        rows = w.shape[0] // len(parts)
        for i, part in enumerate(parts):
            yield f"{prefix}.{part}.weight", w[i * rows:(i + 1) * rows]
            if part != "key":  # whisper.cpp has no key bias (CTranslate2 stores zeros)
                yield f"{prefix}.{part}.bias", b[i * rows:(i + 1) * rows]

    def block(side, prefix, il, cross):
        src = f"{prefix}.blk.{il}."
        dst = f"{side}.blocks.{il}."
        yield from qkv(dst + "attn", src + "attn_qkv.weight", src + "attn_qkv.bias", ("query", "key", "value"))
        yield dst + "attn.out.weight", t[src + "attn_out.weight"]
        yield dst + "attn.out.bias", t[src + "attn_out.bias"]
        for ours, theirs in (("attn_norm", "attn_ln"), ("ffn_norm", "mlp_ln")):
            yield dst + theirs + ".weight", t[src + ours + ".weight"]
            yield dst + theirs + ".bias", t[src + ours + ".bias"]
        for ours, theirs in (("ffn_up", "mlp.0"), ("ffn_down", "mlp.2")):
            yield dst + theirs + ".weight", t[src + ours + ".weight"]
            yield dst + theirs + ".bias", t[src + ours + ".bias"]
        if cross:
            yield dst + "cross_attn_ln.weight", t[src + "cross_norm.weight"]
            yield dst + "cross_attn_ln.bias", t[src + "cross_norm.bias"]
            yield dst + "cross_attn.query.weight", t[src + "cross_q.weight"]
            yield dst + "cross_attn.query.bias", t[src + "cross_q.bias"]
            yield from qkv(dst + "cross_attn", src + "cross_kv.weight", src + "cross_kv.bias", ("key", "value"))
            yield dst + "cross_attn.out.weight", t[src + "cross_out.weight"]
            yield dst + "cross_attn.out.bias", t[src + "cross_out.bias"]

    n_embd = t["enc.conv1.bias"].shape[0]
    n_mels = t["enc.conv1.weight"].shape[1] // 3
    yield "encoder.positional_embedding", t["enc.pos"].reshape(-1, n_embd)
    yield "encoder.conv1.weight", t["enc.conv1.weight"].reshape(n_embd, n_mels, 3)
    yield "encoder.conv1.bias", t["enc.conv1.bias"].reshape(n_embd, 1)
    yield "encoder.conv2.weight", t["enc.conv2.weight"].reshape(n_embd, n_embd, 3)
    yield "encoder.conv2.bias", t["enc.conv2.bias"].reshape(n_embd, 1)
    for il in range(n_enc):
        yield from block("encoder", "enc", il, cross=False)
    yield "encoder.ln_post.weight", t["enc.norm.weight"]
    yield "encoder.ln_post.bias", t["enc.norm.bias"]
    yield "decoder.positional_embedding", t["dec.pos"].reshape(-1, n_embd)
    yield "decoder.token_embedding.weight", t["dec.token_embd"]
    for il in range(n_dec):
        yield from block("decoder", "dec", il, cross=True)
    yield "decoder.ln.weight", t["dec.norm.weight"]
    yield "decoder.ln.bias", t["dec.norm.bias"]


def write_tensor(f, name, arr):
    import numpy as np
    # f16 for matrices (as OpenAI's checkpoints and whisper.cpp's converter), f32 for vectors,
    # conv biases and position tables
    f32 = arr.ndim < 2 or name.endswith("conv1.bias") or name.endswith("conv2.bias") or "positional" in name
    data = np.ascontiguousarray(arr.astype(np.float32 if f32 else np.float16))
    encoded = name.encode("utf-8")
    f.write(struct.pack("<iii", data.ndim, len(encoded), 0 if f32 else 1))
    for dim in reversed(data.shape):
        f.write(struct.pack("<i", dim))
    f.write(encoded)
    f.write(data.tobytes())


def convert(gguf_file, out):
    """whisper.cpp ggml file `out` from a cactus Whisper GGUF (skipped when out is newer)."""
    if os.path.isfile(out) and os.path.getmtime(out) >= os.path.getmtime(gguf_file):
        return out
    import numpy as np
    from gguf import GGUFReader
    r = GGUFReader(gguf_file)

    def scalar(key):
        field = r.fields[key]
        return int(field.parts[field.data[0]][0])

    t = {}
    for tensor in r.tensors:
        if tensor.tensor_type.name not in ("F16", "F32"):
            sys.exit(f"whisper_cpp: {gguf_file}: tensor {tensor.name} is {tensor.tensor_type.name}; convert an F16 file")
        t[tensor.name] = np.array(tensor.data)
    vocab_field = r.fields["tokenizer.ggml.tokens"]
    vocab = [bytes(vocab_field.parts[i]).decode("utf-8") for i in vocab_field.data]
    n_embd, n_head = scalar("whisper.n_embd"), scalar("whisper.n_head")
    n_enc, n_dec = scalar("whisper.encoder.n_layer"), scalar("whisper.decoder.n_layer")
    n_mels, eot = scalar("whisper.n_mels"), scalar("whisper.token.eot")
    hparams = [len(vocab), scalar("whisper.n_audio_ctx"), n_embd, n_head, n_enc, scalar("whisper.n_text_ctx"), n_embd,
               n_head, n_dec, n_mels, 1]
    filters = t["mel_filters"].reshape(n_mels, -1).astype(np.float32)
    decoder = byte_decoder()
    tmp = out + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<I", GGML_MAGIC))
        f.write(struct.pack(f"<{len(hparams)}i", *hparams))
        f.write(struct.pack("<ii", *filters.shape))
        f.write(filters.tobytes())
        f.write(struct.pack("<i", eot))  # the text tokens; whisper.cpp names the special ones itself
        for token in vocab[:eot]:
            b = token_bytes(token, decoder)
            f.write(struct.pack("<i", len(b)))
            f.write(b)
        for name, arr in ggml_tensors(t, n_enc, n_dec):
            write_tensor(f, name, arr)
    os.replace(tmp, out)
    return out


def wav_seconds(path):
    with wave.open(path) as w:
        return w.getnframes() / float(w.getframerate())


def transcribe(binary, model, wav, threads, beam_size):
    """(text, total ms - load ms) of one whisper-cli run."""
    cmd = [binary, "-m", model, "-f", wav, "-t", str(threads), "-nt", "-nf", "-ng", "-bo", "1", "-bs", str(beam_size)]
    # passive OpenMP waits, as for faster-whisper: spinning threads on a shared machine cost 4x here
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"whisper_cpp: whisper-cli failed ({out.returncode}): {out.stderr[-2000:]}")
    total = re.search(r"total time =\s*([0-9.]+) ms", out.stderr)
    load = re.search(r"load time =\s*([0-9.]+) ms", out.stderr)
    if total is None or load is None:
        sys.exit(f"whisper_cpp: no timings in whisper-cli's output: {out.stderr[-2000:]}")
    return out.stdout.strip(), float(total.group(1)) - float(load.group(1))


def rtf(gguf_file, wav, threads, beam_size):
    binary = build()
    model = convert(gguf_file, os.path.join(CACHE, os.path.basename(gguf_file).replace(".gguf", ".ggml.bin")))
    _, ms = transcribe(binary, model, wav, threads, beam_size)
    return ms / 1000.0 / wav_seconds(wav)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    model = convert(sys.argv[1], os.path.join(CACHE, os.path.basename(sys.argv[1]).replace(".gguf", ".ggml.bin")))
    text, ms = transcribe(build(), model, sys.argv[2], threads, 1)
    print(text)
    print(f"whisper.cpp: {ms:.0f} ms, RTF {ms / 1000.0 / wav_seconds(sys.argv[2]):.3f}")
