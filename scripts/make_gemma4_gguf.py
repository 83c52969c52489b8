#!/usr/bin/env python3
"""Writes a random-weight Gemma 4 text GGUF of a real shape (research/GEMMA4.md §1.1, §2.1, §2.2, §7.2),
regenerated from a seed so no multi-GB file is stored or moved: the same (shape, mix, seed) gives the
same bytes on any machine (numpy only; the `gguf` package only for --check).

  make_gemma4_gguf.py --shape e2b --mix q4_0 [--seed 0] [--out PATH] [--check]

Shapes: e2b (35 layers, d 1536, 8/1 heads, head_dim 256 sliding / 512 full, [s,s,s,s,f]x7, FFN 6144 and
12288 in the 20 KV-shared layers 15-34, PLE 256, window 512), e4b (42 layers, d 2560, 8/2 heads,
[s x5,f]x7, FFN 10240, 18 KV-shared layers 24-41), reduced (the e2b structure at CI size: 10 layers
[s,s,s,s,f]x2, 5 KV-shared, d 256, 4/1 heads, head_dim 64/128, FFN 512/1024, PLE 32, window 64).
All keep the real 262144-token vocabulary: every tokenizer.ggml.* key is copied byte for byte from
llama.cpp's models/ggml-vocab-gemma-4.gguf, and tokenizer.chat_template is the E2B template
(tests/chat/templates/gemma4_e2b.jinja, else /work/gemma4_e2b.jinja; --template overrides). The
vocabulary comes from the sdist scripts/fetch_llama_sdist.sh unpacks ($CACTUS_LLAMA_SDIST; --vocab).
Common: RoPE theta 1e4 (sliding) / 1e6 (full, proportional: rope_freqs [head_dim_full/2] = 1.0 for
the first head_dim_full/8 pairs, 1e30 after, as conversion/gemma.py writes), final softcap 30, RMS
eps 1e-6, tied embeddings (no output.weight), context 131072.

Tensor types (--mix q4_0|q8_0):
  - the mix type: every projection (attn_q/k/v/output, ffn_gate/up/down, inp_gate, proj) and both
    embedding tables (token_embd, per_layer_token_embd; the PLE table is most of the file). A real
    `llama-quantize Q4_0` file differs here: it gives both tables Q6_K (tied embeddings count as the
    output tensor, src/llama-quant.cpp), and may move a few ffn_down to Q4_1; this file is the
    "pure" mix so one quant format covers every matrix.
  - F16: per_layer_model_proj, which llama-quantize never quantizes ("not too big so keep them as
    it is") and the converter writes in the model's 16-bit type.
  - F32: norms, rope_freqs, layer_output_scale (1-D tensors are never quantized).

Values (chosen so activations stay sane; final logits have a std of about 1.2 at every shape, far from the softcap):
  - quantized blocks are written in their final format, no quantizer runs: an f16 scale d per block of
    32 and uniform quants (Q4_0 nibbles 0..15, i.e. -8..7, with d of either sign as the quantizer
    writes it, so weights average 0; Q8_0 int8 -127..127, -128 never occurs, as from the quantizer).
    |d| = sigma / rms(quant) x U(0.75, 1.25), so the weights' std is sigma:
    1/sqrt(fan_in) for projections (fan_in = ne[0]); 1.2/sqrt(n_embd) for token_embd (0.031 at E2B;
    the scaled input embedding has an RMS of 1.2 at every shape) and 0.48/sqrt(n_ple) for the PLE
    table (0.03 at E2B);
  - per_layer_model_proj: uniform with std 1/sqrt(n_embd);
  - norm gains U(0.8, 1.2), except attn_q_norm / attn_k_norm: U(0.8, 1.2) x (4/head_dim)^(1/4).
    Gemma 4 scores attention with scale 1.0 (q and k are RMS-normed), so unit gains give q.k a std of
    sqrt(head_dim) = 16 and one-hot attention; these gains give it a std of about 2, so every key in
    the window weighs in and a wrong mask or window shows;
  - layer_output_scale U(0.5, 1.0).

Random streams: every tensor has its own PCG64 streams (numpy's bit generator, whose raw output numpy
keeps stable) whose 128-bit state and increment are the sha256 of "gemma4-random/<seed>/<tensor
name>/<stream>": "q" for quants, "d" for block scales (one word per block: its top 53 bits the
magnitude, its low bit Q4_0's sign), "u" for float values. Only raw 64-bit outputs are used
(random_raw), never numpy's distribution code, which may change between versions. Uniform floats are
(raw >> 11) * 2^-53; quant bytes are the raw words' little-endian bytes. Each block draws a fixed
number of words, so a tensor's bytes do not depend on how it is chunked, and any part of any tensor
can be regenerated alone (tensor_chunks), or as float32 (tensor_values: what a reference
implementation, e.g. transformers on the GPU machine, loads under the tensor's HF name).
"""
import argparse
import hashlib
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_stream as gs  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The llama-cpp-python sdist that scripts/fetch_llama_sdist.sh unpacks ($CACTUS_LLAMA_SDIST names another).
SDIST = os.environ.get("CACTUS_LLAMA_SDIST", os.path.expanduser("~/.cache/cactus/llama-cpp-sdist/llama_cpp_python-0.3.36"))
VOCAB_CANDIDATES = [os.path.join(SDIST, "vendor/llama.cpp/models/ggml-vocab-gemma-4.gguf")]
TEMPLATE_CANDIDATES = [os.path.join(REPO, "tests/chat/templates/gemma4_e2b.jinja"), "/work/gemma4_e2b.jinja"]

N_VOCAB = 262144
COMMON = dict(n_vocab=N_VOCAB, n_ctx=131072, rope_base=1e6, rope_base_swa=1e4, partial_rotary=0.25,
              softcap=30.0, rms_eps=1e-6)
SHAPES = {
    "e2b": dict(n_layer=35, n_embd=1536, n_head=8, n_head_kv=1, head_dim_swa=256, head_dim_full=512, period=5,
                n_ff=6144, double_wide=True, n_kv_shared=20, n_ple=256, window=512),
    "e4b": dict(n_layer=42, n_embd=2560, n_head=8, n_head_kv=2, head_dim_swa=256, head_dim_full=512, period=6,
                n_ff=10240, double_wide=False, n_kv_shared=18, n_ple=256, window=512),
    "reduced": dict(n_layer=10, n_embd=256, n_head=4, n_head_kv=1, head_dim_swa=64, head_dim_full=128, period=5,
                    n_ff=512, double_wide=True, n_kv_shared=5, n_ple=32, window=64),
}
MIXES = {"q4_0": gs.Q4_0, "q8_0": gs.Q8_0}
FILE_TYPE = {gs.Q4_0: 2, gs.Q8_0: 7}  # llama_ftype MOSTLY_Q4_0 / MOSTLY_Q8_0

EMBD_RMS = 1.2   # std of token_embd x sqrt(n_embd): the RMS of the scaled input embedding (std 0.031 at E2B)
PLE_RMS = 0.48   # std of per_layer_token_embd x sqrt(n_ple): the RMS of the scaled PLE rows (std 0.03 at E2B)
GAIN = (0.8, 1.2)
OUT_SCALE = (0.5, 1.0)
QK_SCORE_STD = 2.0
BLOCK_SCALE = (0.75, 1.25)
CHUNK_BLOCKS = 1 << 20  # blocks (or float elements) per generated chunk: 18-34 MiB of output


@dataclass(frozen=True)
class TensorSpec:
    name: str
    ne: tuple          # ggml order: ne[0] is contiguous (= fan_in of a projection)
    ggml_type: int
    init: str          # "quant" (std), "uniform" (lo, hi), "values" (explicit)
    params: tuple


class Model:
    """Per-layer hyper-parameters of a shape, the way llama.cpp derives them from the metadata."""

    def __init__(self, shape):
        if shape not in SHAPES:
            raise ValueError(f"unknown shape '{shape}' (one of {', '.join(SHAPES)})")
        self.shape = shape
        self.__dict__.update(COMMON, **SHAPES[shape])
        L = self.n_layer
        self.is_swa = [(il + 1) % self.period != 0 for il in range(L)]  # [s,..,s,f] repeated
        self.first_shared = L - self.n_kv_shared
        # llama.cpp reads the KV of layer first_shared-2 (sliding) and first_shared-1 (full) in every
        # shared layer (llama-model.cpp), which is right only when those two are of these types.
        if self.is_swa[self.first_shared - 1] or not self.is_swa[self.first_shared - 2]:
            raise ValueError(f"{shape}: layers {self.first_shared - 2}, {self.first_shared - 1} must be sliding, full")
        self.n_ff_layer = [self.n_ff * 2 if self.double_wide and il >= self.first_shared else self.n_ff
                           for il in range(L)]

    def head_dim(self, il):
        return self.head_dim_swa if self.is_swa[il] else self.head_dim_full

    def has_kv(self, il):
        return il < self.first_shared


def arch_kvs(m, mix, seed):
    """(key, type, value[, array type]) of the model keys, in the order conversion/gemma.py writes them."""
    a = "gemma4."
    ff = ([gs.ARRAY, m.n_ff_layer, gs.INT32] if m.double_wide else [gs.UINT32, m.n_ff])
    kvs = [
        ("general.architecture", gs.STRING, "gemma4"),
        ("general.type", gs.STRING, "model"),
        ("general.name", gs.STRING, f"gemma4-{m.shape}-random-{mix}-seed{seed}"),
        (a + "block_count", gs.UINT32, m.n_layer),
        (a + "context_length", gs.UINT32, m.n_ctx),
        (a + "embedding_length", gs.UINT32, m.n_embd),
        (a + "feed_forward_length", *ff),
        (a + "attention.head_count", gs.UINT32, m.n_head),
        (a + "attention.head_count_kv", gs.UINT32, m.n_head_kv),
        (a + "rope.freq_base", gs.FLOAT32, m.rope_base),
        (a + "rope.freq_base_swa", gs.FLOAT32, m.rope_base_swa),
        (a + "attention.layer_norm_rms_epsilon", gs.FLOAT32, m.rms_eps),
        (a + "attention.key_length", gs.UINT32, m.head_dim_full),
        (a + "attention.value_length", gs.UINT32, m.head_dim_full),
        ("general.file_type", gs.UINT32, FILE_TYPE[MIXES[mix]]),
        (a + "final_logit_softcapping", gs.FLOAT32, m.softcap),
        (a + "attention.sliding_window", gs.UINT32, m.window),
        (a + "attention.shared_kv_layers", gs.UINT32, m.n_kv_shared),
        (a + "embedding_length_per_layer_input", gs.UINT32, m.n_ple),
        (a + "attention.sliding_window_pattern", gs.ARRAY, m.is_swa, gs.BOOL),
        (a + "attention.key_length_swa", gs.UINT32, m.head_dim_swa),
        (a + "attention.value_length_swa", gs.UINT32, m.head_dim_swa),
        (a + "rope.dimension_count", gs.UINT32, m.head_dim_full),  # proportional RoPE: n_rot = head_dim
        (a + "rope.dimension_count_swa", gs.UINT32, m.head_dim_swa),
        ("general.quantization_version", gs.UINT32, 2),
    ]
    return kvs


def metadata(m, mix, seed, template, vocab_kvs):
    """Encoded KV records: the model keys, every tokenizer.ggml.* record of vocab_kvs, the template."""
    records = [gs.encode_kv(*kv) for kv in arch_kvs(m, mix, seed)]
    tok = {k: v for k, v in vocab_kvs.items() if k.startswith("tokenizer.ggml.")}
    for need in ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        if need not in tok:
            raise ValueError(f"the vocabulary file has no {need}")
    records += list(tok.values())
    records.append(gs.encode_kv("tokenizer.chat_template", gs.STRING, template))
    return records


def rope_freqs(m):
    n_rot = int(m.head_dim_full * m.partial_rotary / 2)
    return np.array([1.0] * n_rot + [1e30] * (m.head_dim_full // 2 - n_rot), dtype=np.float32)


def tensor_specs(m, mix):
    """Every tensor of the file, in file order, with its type and how its values are drawn."""
    q = MIXES[mix]
    E, P, L = m.n_embd, m.n_ple, m.n_layer

    def proj(name, n_in, n_out):
        return TensorSpec(name, (n_in, n_out), q, "quant", (1.0 / np.sqrt(n_in),))

    def gain(name, n, factor=1.0):
        return TensorSpec(name, (n,), gs.F32, "uniform", (GAIN[0] * factor, GAIN[1] * factor))

    specs = [
        TensorSpec("rope_freqs.weight", (m.head_dim_full // 2,), gs.F32, "values", tuple(rope_freqs(m).tolist())),
        TensorSpec("token_embd.weight", (E, m.n_vocab), q, "quant", (EMBD_RMS / np.sqrt(E),)),
        TensorSpec("per_layer_token_embd.weight", (P * L, m.n_vocab), q, "quant", (PLE_RMS / np.sqrt(P),)),
        TensorSpec("per_layer_model_proj.weight", (E, P * L), gs.F16, "uniform",
                   (-np.sqrt(3.0 / E), np.sqrt(3.0 / E))),
        gain("per_layer_proj_norm.weight", P),
    ]
    for il in range(L):
        b, hd = f"blk.{il}.", m.head_dim(il)
        qk = (QK_SCORE_STD / np.sqrt(hd)) ** 0.5
        specs += [gain(b + "attn_norm.weight", E), proj(b + "attn_q.weight", E, m.n_head * hd)]
        if m.has_kv(il):
            specs += [proj(b + "attn_k.weight", E, m.n_head_kv * hd), proj(b + "attn_v.weight", E, m.n_head_kv * hd)]
        specs += [proj(b + "attn_output.weight", m.n_head * hd, E), gain(b + "attn_q_norm.weight", hd, qk)]
        if m.has_kv(il):
            specs.append(gain(b + "attn_k_norm.weight", hd, qk))
        ff = m.n_ff_layer[il]
        specs += [
            gain(b + "post_attention_norm.weight", E),
            gain(b + "ffn_norm.weight", E),
            proj(b + "ffn_gate.weight", E, ff),
            proj(b + "ffn_up.weight", E, ff),
            proj(b + "ffn_down.weight", ff, E),
            gain(b + "post_ffw_norm.weight", E),
            proj(b + "inp_gate.weight", E, P),
            proj(b + "proj.weight", P, E),
            gain(b + "post_norm.weight", E),
            TensorSpec(b + "layer_output_scale.weight", (1,), gs.F32, "uniform", OUT_SCALE),
        ]
    specs.append(gain("output_norm.weight", E))
    return specs


# ---- random streams --------------------------------------------------------------------------------

def stream(seed, name, kind):
    """A PCG64 bit generator whose state and increment come from sha256(seed, tensor name, stream)."""
    h = hashlib.sha256(f"gemma4-random/{seed}/{name}/{kind}".encode()).digest()
    bg = np.random.PCG64()
    bg.state = {"bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
                "state": {"state": int.from_bytes(h[:16], "little"), "inc": int.from_bytes(h[16:], "little") | 1}}
    return bg


def raw_bytes(bg, n_words):
    return bg.random_raw(n_words).astype("<u8", copy=False).view(np.uint8)


def unit_floats(raw):
    """Raw 64-bit words -> floats in [0, 1) from their top 53 bits."""
    return (raw >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def uniform(bg, n):
    return unit_floats(bg.random_raw(n))


# quant layouts: words of the "q" stream per block, mean square of the quant value
Q_LAYOUT = {gs.Q4_0: (2, np.mean((np.arange(16) - 8.0) ** 2)),
            gs.Q8_0: (4, np.mean(np.concatenate([np.arange(-127, 128), [0]]) ** 2.0))}
_F_MS = (BLOCK_SCALE[0] ** 2 + BLOCK_SCALE[0] * BLOCK_SCALE[1] + BLOCK_SCALE[1] ** 2) / 3  # E[f^2], f ~ U(lo, hi)


def quant_blocks(spec, bq, bd, nb):
    """nb blocks [nb, block bytes] continuing the streams bq (quants) and bd (scales)."""
    words, mean_sq = Q_LAYOUT[spec.ggml_type]
    raw = bd.random_raw(nb)
    f = BLOCK_SCALE[0] + (BLOCK_SCALE[1] - BLOCK_SCALE[0]) * unit_floats(raw)
    if spec.ggml_type == gs.Q4_0:
        # Q4_0's quants average -0.5 (-8..7); the quantizer's d takes the sign of the block's largest
        # element, so over many blocks the weights average 0. With one sign for all blocks, every
        # product would gain a component common to all its outputs (-0.5 d times the input's sum).
        f *= 1.0 - 2.0 * (raw & np.uint64(1)).astype(np.float64)
    d = (spec.params[0] / np.sqrt(mean_sq * _F_MS) * f).astype("<f2")
    qs = raw_bytes(bq, nb * words).reshape(nb, words * 8)
    if spec.ggml_type == gs.Q8_0:
        qs[qs == 0x80] = 0  # int8 -128 -> 0: the quantizer's range is -127..127
    out = np.empty((nb, 2 + words * 8), dtype=np.uint8)
    out[:, :2] = d.view(np.uint8).reshape(nb, 2)
    out[:, 2:] = qs
    return out


def tensor_chunks(spec, seed, chunk=CHUNK_BLOCKS, limit=None):
    """The tensor's bytes as a sequence of arrays; limit: stop after that many blocks (elements for
    float types), to regenerate a prefix."""
    _, block, _ = gs.GGML_TYPES[spec.ggml_type]
    total = int(np.prod(spec.ne)) // block
    if limit is not None:
        total = min(total, limit)
    if spec.init == "values":
        yield np.asarray(spec.params, dtype="<f4")[:total]
        return
    if spec.init == "quant":
        bq, bd = stream(seed, spec.name, "q"), stream(seed, spec.name, "d")
        for start in range(0, total, chunk):
            yield quant_blocks(spec, bq, bd, min(chunk, total - start))
        return
    lo, hi = spec.params
    bu = stream(seed, spec.name, "u")
    dtype = "<f4" if spec.ggml_type == gs.F32 else "<f2"
    for start in range(0, total, chunk):
        yield (lo + (hi - lo) * uniform(bu, min(chunk, total - start))).astype(dtype)


def dequantize_blocks(blocks, ggml_type):
    """[nb, block bytes] Q4_0 / Q8_0 blocks -> [nb * 32] float32. Q4_0: byte j of qs holds element j
    (low nibble) and element j + 16 (high nibble), value d * (q - 8); Q8_0: d * int8."""
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)  # [nb, 1]
    qs = blocks[:, 2:]
    if ggml_type == gs.Q4_0:
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0  # [nb, 32]
    else:
        q = qs.view(np.int8).astype(np.float32)
    return (d * q).reshape(-1)


def tensor_values(spec, seed):
    """The tensor as float32 of shape ne reversed ([n_out, n_in] for a projection, the layout of a
    torch Linear weight), for a reference that loads the same weights unquantized."""
    if spec.init == "quant":
        vals = [dequantize_blocks(c, spec.ggml_type) for c in tensor_chunks(spec, seed)]
    else:
        vals = [c.astype(np.float32) for c in tensor_chunks(spec, seed)]
    return np.concatenate(vals).reshape(spec.ne[::-1])


# ---- writing and checking ----------------------------------------------------------------------------

def first_existing(paths, what, hint=""):
    for p in paths:
        if os.path.isfile(p):
            return p
    raise FileNotFoundError(f"no {what}: looked at {', '.join(paths)}{hint}")


def write(m, mix, seed, out, vocab_path, template_path):
    with open(template_path, encoding="utf-8") as f:
        template = f.read()
    records = metadata(m, mix, seed, template, gs.read_raw_kvs(vocab_path))
    specs = tensor_specs(m, mix)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".partial"
    try:
        w = gs.StreamWriter(tmp, records, [(s.name, s.ne, s.ggml_type) for s in specs])
        for s in specs:
            w.write_tensor(s.name, tensor_chunks(s, seed))
        sha, size = w.close()
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, out)
    return sha, size


def check(m, mix, seed, path, template_path):
    """Re-reads the file with the `gguf` package: metadata values, every tensor's name, shape, type
    and size, the first blocks of every tensor regenerated, and the std / range of a sample of each."""
    import gguf
    from gguf import quants

    r = gguf.GGUFReader(path)
    errors = []

    def value(key):
        f = r.fields.get(key)
        if f is None:
            return None
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            if len(f.data) > 4096:
                return len(f.data)  # vocabulary arrays: the count only
            return [f.parts[i].tolist()[0] for i in f.data]
        if f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(f.parts[f.data[0]]).decode("utf-8")
        return f.parts[f.data[0]].tolist()[0]

    with open(template_path, encoding="utf-8") as f:
        template = f.read()
    for kv in arch_kvs(m, mix, seed):
        key, want = kv[0], kv[2]
        got = value(key)
        if isinstance(want, float):
            ok = got is not None and abs(got - want) <= 1e-6 * abs(want)
        else:
            ok = got == (list(want) if isinstance(want, list) else want)
        if not ok:
            errors.append(f"{key}: {got!r}, expected {want!r}")
    if value("tokenizer.chat_template") != template:
        errors.append("tokenizer.chat_template differs from the template file")
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        if value(key) != m.n_vocab:
            errors.append(f"{key}: {value(key)} entries, expected {m.n_vocab}")

    specs = {s.name: s for s in tensor_specs(m, mix)}
    got = {t.name: t for t in r.tensors}
    if set(got) != set(specs):
        errors.append(f"tensors missing: {sorted(set(specs) - set(got))}, unexpected: {sorted(set(got) - set(specs))}")
    for name, s in specs.items():
        t = got.get(name)
        if t is None:
            continue
        shape = tuple(int(x) for x in t.shape)
        if shape != s.ne or int(t.tensor_type) != s.ggml_type or int(t.n_bytes) != gs.tensor_nbytes(s.ne, s.ggml_type):
            errors.append(f"{name}: shape {shape} type {int(t.tensor_type)} bytes {int(t.n_bytes)}, expected "
                          f"{s.ne} type {s.ggml_type} bytes {gs.tensor_nbytes(s.ne, s.ggml_type)}")
            continue
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)
        want = np.concatenate([c.reshape(-1).view(np.uint8) for c in tensor_chunks(s, seed, limit=4096)])
        if not np.array_equal(raw[:want.size], want):
            errors.append(f"{name}: the first bytes differ from the regenerated ones")
        vals = quants.dequantize(raw[:want.size], gguf.GGMLQuantizationType(s.ggml_type)).astype(np.float64)
        if s.init == "quant":
            std = float(vals.std())
            if not 0.85 * s.params[0] < std < 1.15 * s.params[0]:
                errors.append(f"{name}: std {std:.4g}, expected {s.params[0]:.4g}")
        elif s.init == "uniform" and not (vals.min() >= s.params[0] - 1e-3 and vals.max() <= s.params[1] + 1e-3):
            errors.append(f"{name}: values outside [{s.params[0]:.4g}, {s.params[1]:.4g}]")
    return errors


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="e2b")
    ap.add_argument("--mix", choices=sorted(MIXES), default="q4_0")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="default ~/.cache/cactus/models/gemma4-<shape>-<mix>.gguf")
    ap.add_argument("--vocab", help="GGUF to copy tokenizer.ggml.* from (default: ggml-vocab-gemma-4.gguf of the sdist)")
    ap.add_argument("--template", help="chat template file (default: the E2B template)")
    ap.add_argument("--check", action="store_true", help="re-read the file with the gguf package and check it")
    ap.add_argument("--check-only", action="store_true", help="check an existing --out file without writing")
    args = ap.parse_args(argv)
    if args.seed < 0:
        ap.error("--seed must be >= 0")
    try:
        return run(args)
    except (OSError, ValueError) as e:
        print(f"make_gemma4_gguf: error: {e}", file=sys.stderr)
        return 2


def run(args):
    m = Model(args.shape)
    out = args.out or os.path.expanduser(f"~/.cache/cactus/models/gemma4-{args.shape}-{args.mix}.gguf")
    template = args.template or first_existing(TEMPLATE_CANDIDATES, "Gemma 4 E2B chat template")
    if not args.check_only:
        vocab = args.vocab or first_existing(VOCAB_CANDIDATES, "ggml-vocab-gemma-4.gguf",
                                               " (scripts/fetch_llama_sdist.sh downloads it)")
        t0 = time.time()
        sha, size = write(m, args.mix, args.seed, out, vocab, template)
        print(f"{out}\n  size {size} bytes ({size / 2**30:.2f} GiB), written in {time.time() - t0:.1f} s\n  sha256 {sha}")
    if args.check or args.check_only:
        t0 = time.time()
        errors = check(m, args.mix, args.seed, out, template)
        for e in errors:
            print("check:", e, file=sys.stderr)
        if errors:
            return 1
        print(f"  check: {len(tensor_specs(m, args.mix))} tensors and the metadata as specified ({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
