"""Our quantization kernels (through bin/quant_probe) against the gguf package's numpy code.

- dequantize: random raw blocks (random bytes, sane fp16 scales) must decode exactly as gguf does;
- quantize: the ggml-reference quantizers must produce the same bytes as gguf's;
- round trip: our K-quant quantizers' bytes, decoded by gguf, must approximate the input;
- dot: vec_dot_ref and every CPU kernel table must equal the float64 dot of the decoded rows.
"""
import os
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin")
PROBE = os.path.join(BIN, "quant_probe")

BLOCK_COUNTS = [1, 3, 7, 33]
# byte offsets of the fp16 scale fields inside one block (ggml-common.h)
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
WEIGHT_TYPES = list(HALF_FIELDS) + [T.F16, T.BF16, T.F32]
DOT_TYPE = {
    T.Q4_0: T.Q8_0, T.Q5_0: T.Q8_0, T.Q8_0: T.Q8_0, T.Q4_1: T.Q8_1, T.Q5_1: T.Q8_1,
    T.Q2_K: T.Q8_K, T.Q3_K: T.Q8_K, T.Q4_K: T.Q8_K, T.Q5_K: T.Q8_K, T.Q6_K: T.Q8_K,
    T.F16: T.F32, T.BF16: T.F32, T.F32: T.F32,
}


def probe(mode, qtype, n, stdin):
    assert os.path.exists(PROBE), f"{PROBE} is missing: build the quant_probe target"
    r = subprocess.run([PROBE, mode, qtype.name, str(n)], input=stdin, capture_output=True,
                       check=False)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def block_size(qtype):
    return GGML_QUANT_SIZES[qtype][0]


# gguf's table still lists Q8_1 at 40 bytes (float d, s); ggml's block_q8_1 holds two halves: 36
ACTIVATION_BLOCK_BYTES = {T.Q8_1: 36, T.Q8_K: 292}


def row_bytes(qtype, n):
    bs, ts = GGML_QUANT_SIZES[qtype]
    return n // bs * ACTIVATION_BLOCK_BYTES.get(qtype, ts)


def random_row(qtype, n_blocks, rng):
    """Random raw bytes of one row, with finite, moderately sized half-precision scales."""
    n = n_blocks * block_size(qtype)
    if qtype == T.F32:
        return n, rng.standard_normal(n).astype(np.float32).tobytes()
    if qtype == T.F16:
        return n, rng.standard_normal(n).astype(np.float16).tobytes()
    if qtype == T.BF16:
        bits = rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16
        return n, bits.astype(np.uint16).tobytes()
    raw = rng.integers(0, 256, size=(n_blocks, GGML_QUANT_SIZES[qtype][1]), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        scales = (rng.uniform(0.001, 0.1, n_blocks) * rng.choice([-1, 1], n_blocks))
        raw[:, off:off + 2] = scales.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    return n, raw.tobytes()


def decode_activations(dot_type, raw, n):
    """float64 values of the activation row and, for Q8_1, the stored per-block sums s."""
    if dot_type == T.F32:
        return np.frombuffer(raw, dtype=np.float32).astype(np.float64), None
    if dot_type == T.Q8_0:
        return dequantize(np.frombuffer(raw, dtype=np.uint8), T.Q8_0).astype(np.float64), None
    if dot_type == T.Q8_1:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 36)
        d = b[:, 0:2].copy().view(np.float16).astype(np.float64)
        s = b[:, 2:4].copy().view(np.float16).astype(np.float64)
        qs = b[:, 4:].copy().view(np.int8).astype(np.float64)
        sums = qs.sum(axis=1, keepdims=True)
        # s holds d * sum(qs) in fp16, with d before its own rounding to fp16 (as ggml)
        np.testing.assert_allclose(s, d * sums, rtol=2.0 ** -10, atol=1e-7)
        return (d * qs).reshape(-1), s.reshape(-1)
    assert dot_type == T.Q8_K
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 292)
    d = b[:, 0:4].copy().view(np.float32).astype(np.float64)
    qs = b[:, 4:260].copy().view(np.int8)
    bsums = b[:, 260:292].copy().view(np.int16)
    np.testing.assert_array_equal(bsums, qs.reshape(-1, 16, 16).astype(np.int32).sum(axis=2))
    return (d * qs.astype(np.float64)).reshape(-1), None


@pytest.mark.parametrize("qtype", WEIGHT_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_blocks", BLOCK_COUNTS)
def test_dequantize_matches_gguf(qtype, n_blocks):
    rng = np.random.default_rng(1000 * int(qtype) + n_blocks)
    n, raw = random_row(qtype, n_blocks, rng)
    ours = np.frombuffer(probe("dequant", qtype, n, raw), dtype=np.float32)
    theirs = dequantize(np.frombuffer(raw, dtype=np.uint8), qtype).reshape(-1).astype(np.float32)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.F16, T.BF16],
                         ids=lambda t: t.name)
@pytest.mark.parametrize("n_blocks", BLOCK_COUNTS)
def test_quantize_bytes_match_gguf(qtype, n_blocks):
    rng = np.random.default_rng(2000 * int(qtype) + n_blocks)
    n = n_blocks * block_size(qtype) * (32 if qtype in (T.F16, T.BF16) else 1)
    x = (rng.standard_normal(n) * rng.uniform(0.01, 10)).astype(np.float32)
    x[:3] = 0.0  # exact zeros and a zero block are legal input
    ours = np.frombuffer(probe("quantize", qtype, n, x.tobytes()), dtype=np.uint8)
    theirs = quantize(x.reshape(1, -1), qtype).view(np.uint8).reshape(-1)
    np.testing.assert_array_equal(ours, theirs)


# Round trip NMSE bounds of our simple K-quant quantizers on Gaussian data (decoded by gguf).
ROUND_TRIP_NMSE = {T.Q2_K: 0.13, T.Q3_K: 0.035, T.Q4_K: 0.009, T.Q5_K: 0.0022, T.Q6_K: 0.0006}


@pytest.mark.parametrize("qtype", list(ROUND_TRIP_NMSE), ids=lambda t: t.name)
@pytest.mark.parametrize("n_blocks", BLOCK_COUNTS)
def test_kquant_quantizer_round_trip(qtype, n_blocks):
    rng = np.random.default_rng(3000 * int(qtype) + n_blocks)
    n = n_blocks * 256
    x = rng.standard_normal(n).astype(np.float32)
    raw = probe("quantize", qtype, n, x.tobytes())
    back = dequantize(np.frombuffer(raw, dtype=np.uint8), qtype).reshape(-1)
    nmse = float(np.sum((back - x) ** 2) / np.sum(x ** 2))
    assert nmse < ROUND_TRIP_NMSE[qtype], nmse


@pytest.mark.parametrize("n_blocks", BLOCK_COUNTS)
def test_q8_k_activation_round_trip(n_blocks):
    rng = np.random.default_rng(4000 + n_blocks)
    n = n_blocks * 256
    x = rng.standard_normal(n).astype(np.float32) * 3
    raw = probe("dot", T.Q4_K, n, bytes(row_bytes(T.Q4_K, n)) + x.tobytes())
    values, _ = decode_activations(T.Q8_K, raw[:row_bytes(T.Q8_K, n)], n)
    d = np.abs(x.reshape(-1, 256)).max(axis=1) / 127
    err = np.abs(values - x).reshape(-1, 256)
    assert np.all(err <= d[:, None] * 0.5001)


@pytest.mark.parametrize("qtype", WEIGHT_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_blocks", BLOCK_COUNTS)
def test_vec_dot_matches_float_dot(qtype, n_blocks):
    rng = np.random.default_rng(5000 * int(qtype) + n_blocks)
    n, w_raw = random_row(qtype, n_blocks, rng)
    x = rng.standard_normal(n).astype(np.float32)
    out = probe("dot", qtype, n, w_raw + x.tobytes())
    dot_type = DOT_TYPE[qtype]
    xq_bytes = n * 4 if dot_type == T.F32 else row_bytes(dot_type, n)
    xv, sums = decode_activations(dot_type, out[:xq_bytes], n)
    results = np.frombuffer(out[xq_bytes:], dtype=np.float32)
    assert len(results) >= 2  # the reference, then at least the generic table
    w = dequantize(np.frombuffer(w_raw, dtype=np.uint8), qtype).reshape(-1).astype(np.float64)
    expected = float(np.dot(w, xv))
    scale = float(np.sum(np.abs(w * xv))) + 1e-30
    if sums is not None:
        # Q4_1 / Q5_1: the min term uses the stored fp16 s = d * sum(qs), not the exact sum
        mins = w_raw_mins(qtype, w_raw)
        exact_sums = xv.reshape(-1, 32).sum(axis=1)
        expected += float(np.sum(mins * (sums - exact_sums)))
    for value in results:
        assert abs(float(value) - expected) <= 2e-5 * scale, (float(value), expected, results)


def w_raw_mins(qtype, w_raw):
    b = np.frombuffer(w_raw, dtype=np.uint8).reshape(-1, GGML_QUANT_SIZES[qtype][1])
    return b[:, 2:4].copy().view(np.float16).astype(np.float64).reshape(-1)
