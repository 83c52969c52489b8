"""Gemma 4 against transformers, layer by layer, without torch: the tiny faithful model of
tests/models/gemma4_tiny.py (E2B's structure at hidden 128: [s,s,s,s,f]x2, head_dim 32/64, KV sharing
from layer 5, double-wide MLPs, PLE 16, window 8, softcap 30) is rebuilt from its seed with numpy and
written to GGUF as llama.cpp's converter writes it (scripts/check_transformers.py --family gemma4
checks the two files are bit-equal), then run by bin/model_probe and compared with transformers'
intermediates in tests/models/data/gemma4_tiny_golden.npz (prompts of 12, 24 and 40 tokens):
  - KV cache in f32: every layer's attn_out, ffn_out, ple_out and layer_out, and the global embd,
    per_layer_inputs and result_norm, within 1e-4 relative error (||ours - ref|| / ||ref||), and every
    position's log-probabilities over the whole vocabulary within 1e-4;
  - the single-token decode path (the prompt prefilled in chunks of 5 or 13, then one token at a
    time): the sliding rings wrap and the KV-shared layers read their sources' caches; within 1e-4;
  - KV cache in f16: no further from transformers than llama.cpp is on the same file with its f16
    cache (about 1e-2 at the worst position, mostly the f16 rounding both engines share; llama.cpp's
    CPU GELU through an fp16 table, research/GEMMA4.md §0, adds ~5e-3);
  - llama.cpp reads our file as transformers' model (a check of the writer that needs no cactus).

The goldens come from scripts/check_transformers.sh --family gemma4 --write-golden (torch venv)."""
import json
import os

import numpy as np
import pytest

import gemma4_tiny
import model_dump as md

gguf = pytest.importorskip("gguf")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "model_probe")
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gemma4_tiny_golden.npz")
REL_BOUND = 1e-4
LOGP_BOUND = 1e-4
LLAMA_F32_BOUND = 2e-2  # llama.cpp vs transformers with an f32 cache (its fp16 GELU table): 4e-3 to 8e-3 measured
F16_MAX_SLACK = 1.5  # test_f16_kv_no_further_from_transformers_than_llama_cpp says why
DECODE_SPLIT = 15
REGENERATE = "scripts/check_transformers.sh --family gemma4 --write-golden"


@pytest.fixture(scope="module")
def golden():
    with np.load(GOLDEN) as z:
        return {k: z[k] for k in z.files}


def golden_prompts(golden):
    return [golden[f"p{k}_tokens"].tolist() for k in range(len(gemma4_tiny.PROMPT_LENGTHS))]


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory, golden):
    path = str(tmp_path_factory.mktemp("gemma4") / "gemma4-tiny.gguf")
    tensors = gemma4_tiny.write_gguf(path, int(golden["seed"]))
    assert gemma4_tiny.weights_digest(tensors) == str(golden["weights_sha256"]), \
        f"tests/models/gemma4_tiny.py no longer makes the goldens' weights: {REGENERATE}"
    return path


@pytest.fixture(scope="module")
def model(gguf_path):
    """The file, once our build loads it; a build without the gemma4 architecture skips (with the reason)."""
    assert os.path.exists(PROBE), PROBE
    failure = md.load_failure(PROBE, gguf_path)
    if failure and "architecture 'gemma4' is not supported" in failure:
        pytest.skip(f"this build has no gemma4 model: {failure}")
    assert failure is None, failure
    return gguf_path


def test_goldens_match_the_generator(golden):
    """The committed goldens were made from this configuration and these prompts."""
    assert json.loads(str(golden["config"])) == json.loads(json.dumps(gemma4_tiny.CONFIG)), REGENERATE
    assert golden_prompts(golden) == gemma4_tiny.prompts(int(golden["seed"])), REGENERATE
    assert max(len(p) for p in golden_prompts(golden)) > gemma4_tiny.CONFIG["sliding_window"] * 4


def test_intermediates_match_transformers_f32_kv(model, golden, tmp_path):
    prompts = golden_prompts(golden)
    ours = md.dump(PROBE, model, prompts, md.ALL_NAMES, str(tmp_path), kv_type="f32")
    failures = []
    for k, tokens in enumerate(prompts):
        names = [n for n in md.ALL_NAMES if f"p{k}_{n}" in golden]
        missing = [n for n in names if n not in ours[k]]
        assert not missing, f"prompt {k}: not dumped: {missing}"
        errors = {n: md.rel_err(ours[k][n], golden[f"p{k}_{n}"]) for n in names}
        layer = {n: e for n, e in errors.items() if np.ndim(e) == 1}
        print(f"\nprompt {k} ({len(tokens)} tokens), relative error per layer:")
        print(md.layer_table(layer, md.LAYER_NAMES))
        print(", ".join(f"{n} {float(e):.2e}" for n, e in errors.items() if np.ndim(e) == 0))
        d = md.max_dlogp(ours[k]["logits"], golden[f"p{k}_logits"])
        print(f"max |dlogp| per position: {' '.join(f'{v:.1e}' for v in d)}")
        failures += [f"prompt {k} {n}: {float(np.max(e)):.2e}" for n, e in errors.items() if np.max(e) > REL_BOUND]
        failures += [f"prompt {k} position {i}: max |dlogp| {v:.2e}" for i, v in enumerate(d) if v > LOGP_BOUND]
    assert not failures, failures


@pytest.mark.parametrize("chunk", [5, 13])
def test_decode_path_matches_transformers(model, golden, chunk):
    """Prefill tokens[:15] `chunk` at a time (13 > the window of 8: the engine splits), then one token
    per step to 40: every sliding ring wraps several times and layers 5-9 read layers 3 and 4."""
    tokens = golden_prompts(golden)[-1]
    n_vocab = gemma4_tiny.CONFIG["vocab_size"]
    rows = md.decode_logprobs(PROBE, model, tokens[:DECODE_SPLIT], tokens[DECODE_SPLIT:], n_vocab, chunk,
                              kv_type="f32")
    ref = md.log_softmax(golden[f"p{len(gemma4_tiny.PROMPT_LENGTHS) - 1}_logits"])[DECODE_SPLIT - 1:-1]
    d = np.max(np.abs(rows - ref), axis=-1)
    print(f"\nchunk {chunk}: max |dlogp| per step: {' '.join(f'{v:.1e}' for v in d)}")
    assert d.max() <= LOGP_BOUND


def test_f16_kv_no_further_from_transformers_than_llama_cpp(model, golden, tmp_path):
    """Both engines round the same keys and values to f16, and that rounding is most of either's
    distance (llama.cpp's f16 cache alone moves its log-probabilities by 7e-3 to 1.3e-2 here, its GELU
    table by less), so the worst position depends on which values round unluckily and falls either
    side by 20% or more. The mean over every position and token must not be worse than llama.cpp's;
    the max may be 1.5x (a cache in bf16, with 8x f16's rounding error, would exceed it)."""
    pytest.importorskip("llama_cpp")
    prompts = golden_prompts(golden)
    ours = md.dump(PROBE, model, prompts, ("logits",), str(tmp_path), kv_type="f16")
    theirs = md.llama_cpp_logits(model, prompts, kv_type="f16")
    for k in range(len(prompts)):
        ref = golden[f"p{k}_logits"]
        max_ours, max_llama = md.max_dlogp(ours[k]["logits"], ref).max(), md.max_dlogp(theirs[k], ref).max()
        mean_ours, mean_llama = md.mean_dlogp(ours[k]["logits"], ref), md.mean_dlogp(theirs[k], ref)
        print(f"\nprompt {k}: |dlogp| vs transformers, f16 KV: cactus max {max_ours:.2e} mean {mean_ours:.2e}, "
              f"llama.cpp max {max_llama:.2e} mean {mean_llama:.2e}")
        assert mean_ours <= mean_llama
        assert max_ours <= F16_MAX_SLACK * max_llama


def test_llama_cpp_reads_the_file_as_transformers(gguf_path, golden):
    """Our writer's file in llama.cpp (f32 cache) gives transformers' log-probabilities up to its fp16
    GELU table, and the same most likely token at every position."""
    pytest.importorskip("llama_cpp")
    prompts = golden_prompts(golden)
    theirs = md.llama_cpp_logits(gguf_path, prompts, kv_type="f32")
    for k in range(len(prompts)):
        ref = golden[f"p{k}_logits"]
        d = md.max_dlogp(theirs[k], ref)
        print(f"\nprompt {k}: llama.cpp (f32 KV) vs transformers, max |dlogp| {d.max():.2e}")
        assert d.max() <= LLAMA_F32_BOUND
        assert np.array_equal(np.argmax(theirs[k], axis=-1), np.argmax(ref, axis=-1))
