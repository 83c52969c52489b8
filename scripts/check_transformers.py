"""By-hand cross-check of a model family against Hugging Face transformers, layer by layer (outside CI:
transformers needs torch, ~5.6 GB from PyPI with its CUDA packages).

  scripts/check_transformers.sh [--family qwen3|lfm2|gemma4 ...] [--write-golden]
      (makes ~/.cache/cactus/torch-venv and finds the llama-cpp-python 0.3.36 sdist, then runs this)
  or directly: ~/.cache/cactus/torch-venv/bin/python scripts/check_transformers.py \
      --sdist /path/to/llama_cpp_python-0.3.36 --build build --family gemma4

Chain, per family: a small random-weight transformers model (float32, eager attention) -> llama.cpp's
own converter (convert_hf_to_gguf.py from the sdist, f32; its set_vocab replaced by a small synthetic
vocabulary: the tokenizer is not what is checked) -> our forward pass (bin/model_probe). transformers'
named intermediates come from forward hooks (tests/models/model_dump.py lists the names); the probe
dumps the same names. Printed: a per-layer table of relative errors ||ours - ref|| / ||ref||, and per
position the max |d log p| over the whole vocabulary, teacher-forced and through the single-token
decode path (prompt prefilled in chunks of 5), with llama.cpp's distance on the same file beside it.
A probe without the dump request or --kv-type (older builds) is compared on log-probabilities alone
(score requests, f16 KV cache) with the looser bound of that cache.

gemma4 also: the weights come from tests/models/gemma4_tiny.py (numpy, from a seed); the converter's
file must equal gemma4_tiny.write_gguf's (tensors bit for bit, every non-general key's value and type),
which is what lets CI (tests/models/test_gemma4_oracle.py) rebuild it without torch; transformers'
intermediates are compared with the committed goldens tests/models/data/gemma4_tiny_golden.npz, or
rewrite them with --write-golden.

Time (2 x86 cores, no GPU): --family gemma4 alone about 40 s (90 s while others build), all three
families about 85 s; most of it is importing torch and transformers and running the converter, the
models themselves take well under a second."""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import gemma4_tiny  # noqa: E402
import model_dump as md  # noqa: E402
from hf_check_common import convert_f32, gguf_differences, llama_cpp_logits, python_has  # noqa: E402
from lfm2_synthetic import lfm2_vocab  # noqa: E402
from synthetic_vocab import byte_vocab  # noqa: E402

GOLDEN = os.path.join(REPO, "tests", "models", "data", "gemma4_tiny_golden.npz")
DECODE_SPLIT, DECODE_CHUNK = 15, 5  # prefill tokens[:15] five at a time, then one token per step
F16_BOUND = 5e-2  # max |d log p| of a probe with the f16 KV cache: on a random tied-head qwen3
# llama.cpp reaches 3.9e-2 against transformers as we do (tests/models/test_qwen3_synthetic.py)
# The tied qwen3/lfm2 heads give logits of tens of units: transformers' own cached path moves their
# log-probabilities by 1.3e-4 (fp32 order of operations alone), so an f32 comparison allows 1e-3.
LOGP_F32_WIDE_LOGITS = 1e-3


# ---- the families: a model, its vocabulary, and where its named intermediates are in transformers ----

def spread_weights(model, norm_spread, head_scale=1.0):
    """Norm gains 1 +- norm_spread, matrices of unit gain (embeddings of unit std), so no path is trivial."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + norm_spread * torch.randn_like(p))
            elif "conv.weight" in name and p.dim() == 3:  # lfm2: [n_embd, 1, L] depthwise taps
                p.copy_(0.6 * torch.randn_like(p))
            elif p.dim() == 2:
                fan_in = p.shape[1] if "embed_tokens" not in name else 1
                scale = head_scale if name == "lm_head.weight" else 1.0
                p.copy_(scale * torch.randn_like(p) / np.sqrt(fan_in))
    return model


def build_qwen3(case):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(case["seed"])
    config = Qwen3Config(vocab_size=len(byte_vocab()[0]), hidden_size=256, intermediate_size=512,
                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=96,
                         max_position_embeddings=512, rope_theta=1000000.0, rms_norm_eps=1e-6,
                         tie_word_embeddings=case["tied"])
    config._attn_implementation = "eager"
    return spread_weights(Qwen3ForCausalLM(config).float().eval(), 0.5)


def qwen3_vocab(writer):
    tokens, types, merges = byte_vocab()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(len(tokens) - 2)
    writer.add_add_bos_token(False)


def build_lfm2(case):
    from transformers import Lfm2Config, Lfm2ForCausalLM

    torch.manual_seed(case["seed"])
    config = Lfm2Config(vocab_size=len(lfm2_vocab()[0]), hidden_size=256, intermediate_size=1024,
                        num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=4096, norm_eps=1e-5, tie_word_embeddings=case["tied"],
                        conv_L_cache=3, full_attn_idxs=[2, 5],
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                        block_auto_adjust_ff_dim=True, block_multiple_of=256, block_ffn_dim_multiplier=1.0)
    config._attn_implementation = "eager"
    return spread_weights(Lfm2ForCausalLM(config).float().eval(), 0.5, head_scale=3.0)


def lfm2_set_vocab(writer):
    tokens, types, merges = lfm2_vocab()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("lfm2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_add_bos_token(False)


def build_gemma4(case):
    """transformers' Gemma4ForCausalLM holding exactly gemma4_tiny's numpy weights."""
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    config = Gemma4TextConfig(**gemma4_tiny.CONFIG)
    config._attn_implementation = "eager"
    model = Gemma4ForCausalLM(config).float().eval()
    state = {k: torch.from_numpy(v) for k, v in gemma4_tiny.hf_tensors(case["seed"]).items()}
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items() if k != "lm_head.weight"}
    ours = {k: tuple(v.shape) for k, v in state.items()}
    if expected != ours:
        sys.exit(f"gemma4_tiny.hf_shapes differs from transformers' model: "
                 f"{sorted(set(expected.items()) ^ set(ours.items()))}")
    model.load_state_dict(state, strict=False)
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        sys.exit("gemma4: the output head is not tied to the embeddings")
    return model


def decoder_taps(model, mixers, ffn, result_norm):
    """(name, module, layer) hooks: the block outputs that are added to the residual, and the layers."""
    inner = model.model
    taps = [("embd", inner.embed_tokens, None), ("result_norm", getattr(inner, result_norm), None)]
    for il, layer in enumerate(inner.layers):
        mixer = next(getattr(layer, m) for m in mixers if hasattr(layer, m))
        taps += [("attn_out", mixer, il), ("ffn_out", getattr(layer, ffn), il), ("layer_out", layer, il)]
    return taps


def gemma4_taps(model):
    taps = [("embd", model.model.embed_tokens, None), ("result_norm", model.model.norm, None)]
    for il, layer in enumerate(model.model.layers):
        taps += [("attn_out", layer.post_attention_layernorm, il), ("ffn_out", layer.post_feedforward_layernorm, il),
                 ("ple_out", layer.post_per_layer_input_norm, il), ("layer_out", layer, il)]
    return taps


def gemma4_dir_files(hf_dir):
    """The converter trims embed_tokens to the tokenizer's size, read from tokenizer.json."""
    tokens = gemma4_tiny.vocab()[0]
    with open(os.path.join(hf_dir, "tokenizer.json"), "w") as f:
        json.dump({"model": {"vocab": {t: i for i, t in enumerate(tokens)}}, "added_tokens": []}, f)


def random_prompts(seed, n_vocab, lengths=(48,)):
    rng = np.random.default_rng(seed + 100)
    return [[int(t) for t in rng.integers(0, n_vocab - 4, size=n)] for n in lengths]


FAMILIES = {
    "qwen3": dict(arch="Qwen3ForCausalLM", build=build_qwen3, set_vocab=qwen3_vocab,
                  taps=lambda m: decoder_taps(m, ("self_attn",), "mlp", "norm"),
                  cases=[dict(label="tied", seed=3, tied=True), dict(label="untied", seed=4, tied=False)],
                  prompts=lambda case: random_prompts(case["seed"], len(byte_vocab()[0])),
                  rel_bound=1e-4, logp_bound=LOGP_F32_WIDE_LOGITS),
    "lfm2": dict(arch="Lfm2ForCausalLM", build=build_lfm2, set_vocab=lfm2_set_vocab,
                 taps=lambda m: decoder_taps(m, ("self_attn", "conv"), "feed_forward", "embedding_norm"),
                 cases=[dict(label="tied", seed=3, tied=True), dict(label="untied", seed=4, tied=False)],
                 prompts=lambda case: random_prompts(case["seed"], len(lfm2_vocab()[0])),
                 rel_bound=1e-4, logp_bound=LOGP_F32_WIDE_LOGITS),
    "gemma4": dict(arch="Gemma4ForCausalLM", build=build_gemma4, set_vocab=gemma4_tiny.write_vocab,
                   taps=gemma4_taps, dir_files=gemma4_dir_files,
                   cases=[dict(label="tiny", seed=gemma4_tiny.SEED)],
                   prompts=lambda case: gemma4_tiny.prompts(case["seed"]),
                   rel_bound=1e-4, logp_bound=1e-4),
}


# ---- transformers' side ----

def reference_dump(model, tokens, taps):
    """transformers' named intermediates of one teacher-forced pass: {name: float32 array} with the
    shapes of model_dump (per-layer names stacked to [n_layer, T, W])."""
    records = {}

    def keep(name, il, t):
        t = t[0] if isinstance(t, tuple) else t
        records.setdefault(name, {})[il] = t.detach()[0].float().numpy().copy()

    handles = [module.register_forward_hook(lambda mod, inp, out, n=name, i=il: keep(n, i, out))
               for name, module, il in taps]
    inner = model.model
    if hasattr(inner, "project_per_layer_inputs"):  # Gemma 4 PLE: a method, not a module
        project = inner.project_per_layer_inputs

        def recorded(*args, **kwargs):
            out = project(*args, **kwargs)  # [1, T, n_layer, P]
            records["per_layer_inputs"] = {None: out[0].reshape(out.shape[1], -1).detach().float().numpy().copy()}
            return out

        inner.project_per_layer_inputs = recorded
    try:
        with torch.no_grad():
            logits = model(torch.tensor([tokens]), use_cache=False).logits[0].float().numpy()
    finally:
        for h in handles:
            h.remove()
        inner.__dict__.pop("project_per_layer_inputs", None)
    out = {"logits": logits}
    for name, per_layer in records.items():
        if None in per_layer:
            out[name] = per_layer[None]
        elif sorted(per_layer) == list(range(len(model.model.layers))):
            out[name] = np.stack([per_layer[il] for il in range(len(per_layer))])
    return out


def reference_decode(model, tokens, split, chunk):
    """transformers' own cached path (prefill in chunks, then one token at a time): logits rows
    predicting tokens[split:], or None where the family's cache does not take this path."""
    import inspect

    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    rows, cache = [], None
    try:
        with torch.no_grad():
            steps = [tokens[i:min(i + chunk, split)] for i in range(0, split, chunk)] + [[t] for t in tokens[split:-1]]
            for k, ids in enumerate(steps):
                out = model(torch.tensor([ids]), use_cache=True, **{cache_arg: cache})
                cache = out["cache"] if "cache" in out else out["past_key_values"]
                if k >= len(steps) - (len(tokens) - split):
                    rows.append(out.logits[0, -1].float().numpy())
    except Exception as e:  # noqa: BLE001 - a report line, not a check
        print(f"  transformers' cached path not run: {type(e).__name__}: {e}")
        return None
    return np.stack(rows)


# ---- comparisons ----

def fmt_positions(values):
    return " ".join(f"{v:.1e}" for v in values)


def compare_dumps(ours, ref, names, rel_bound):
    """Prints the per-layer table and the global rows; returns the worst relative error."""
    errors = {n: md.rel_err(ours[n], ref[n]) for n in names if n in ours and n in ref and ref[n].ndim == 3}
    missing = [n for n in names if n in ref and n not in ours]
    if errors:
        print("    " + md.layer_table(errors, md.LAYER_NAMES).replace("\n", "\n    "))
    glob = {n: float(md.rel_err(ours[n], ref[n])) for n in md.GLOBAL_NAMES if n in ours and n in ref}
    print("    " + ", ".join(f"{n} {e:.2e}" for n, e in glob.items()))
    if missing:
        print(f"    not dumped by cactus: {missing}")
    worst = max([float(np.max(e)) for e in errors.values()] + list(glob.values()) + [0.0])
    return worst <= rel_bound and not missing, worst


def gemma4_extras(case, hf_dir, conv_path, workdir, refs, prompts, write_golden):
    """The converter's file against gemma4_tiny.write_gguf's, and transformers' intermediates against
    the committed goldens (or rewrites them). Returns False on a difference."""
    ours_path = os.path.join(workdir, "gemma4-ours.gguf")
    tensors = gemma4_tiny.write_gguf(ours_path, case["seed"])
    diffs = gguf_differences(conv_path, ours_path)
    from gguf import GGUFReader

    reader = GGUFReader(conv_path)
    n_keys = sum(1 for k in reader.fields if not k.startswith(("general.", "GGUF.")))
    print(f"  llama.cpp's converter vs gemma4_tiny.write_gguf: {len(reader.tensors)} tensors, {n_keys} keys: "
          + ("identical (tensors bit-equal; keys equal in value and type)" if not diffs
             else f"{len(diffs)} differences"))
    for d in diffs:
        print("    " + d)
    digest = gemma4_tiny.weights_digest(tensors)
    if write_golden:
        write_gemma4_golden(case["seed"], digest, prompts, refs)
        return not diffs
    if not os.path.exists(GOLDEN):
        print(f"  no goldens at {GOLDEN}: run with --write-golden")
        return False
    worst, same = 0.0, True
    with np.load(GOLDEN) as z:
        same = str(z["weights_sha256"]) == digest
        for k, ref in enumerate(refs):
            same = same and z[f"p{k}_tokens"].tolist() == prompts[k]
            for name in md.ALL_NAMES:
                if f"p{k}_{name}" in z.files:
                    worst = max(worst, float(np.max(md.rel_err(ref[name], z[f"p{k}_{name}"]))))
    print(f"  transformers now vs the committed goldens: weights and prompts {'equal' if same else 'DIFFER'}, "
          f"worst relative error {worst:.1e}")
    return not diffs and same and worst <= 1e-5


def write_gemma4_golden(seed, digest, prompts, refs):
    """Every named intermediate of the longest prompt; the shorter ones keep layer_out and the global
    names (the file stays near 1.3 MB)."""
    import transformers

    data = {"seed": np.int64(seed), "weights_sha256": np.array(digest),
            "config": np.array(json.dumps(gemma4_tiny.CONFIG)),
            "versions": np.array(f"transformers {transformers.__version__}, torch {torch.__version__}")}
    for k, (tokens, ref) in enumerate(zip(prompts, refs)):
        data[f"p{k}_tokens"] = np.array(tokens, dtype=np.int32)
        keep = md.ALL_NAMES if k == len(prompts) - 1 else md.GLOBAL_NAMES + ("layer_out",)
        for name in keep:
            data[f"p{k}_{name}"] = ref[name].astype(np.float32)
    os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
    np.savez_compressed(GOLDEN, **data)
    print(f"  wrote {GOLDEN} ({os.path.getsize(GOLDEN) / 1e6:.2f} MB)")


# ---- one case ----

def cactus_side(fam, probe, gguf_path, prompts, refs, n_vocab, workdir, llama):
    """Our probe against transformers (and llama.cpp's distance beside it). Returns (ok, status)."""
    failure = md.load_failure(probe, gguf_path)
    if failure:
        print(f"  cactus: {failure}")
        return False, "not loaded"
    ok = True
    if md.supports_flag(probe, gguf_path, "--kv-type", "f32"):
        ours = md.dump(probe, gguf_path, prompts, md.ALL_NAMES, workdir, kv_type="f32")
        ours16 = md.dump(probe, gguf_path, prompts, ("logits",), os.path.join(workdir, "f16"), kv_type="f16")
        for k, (tokens, ref) in enumerate(zip(prompts, refs)):
            print(f"  prompt {k} ({len(tokens)} tokens), cactus KV f32, relative error per layer:")
            good, _ = compare_dumps(ours[k], ref, md.ALL_NAMES, fam["rel_bound"])
            d32 = md.max_dlogp(ours[k]["logits"], ref["logits"])
            d16 = md.max_dlogp(ours16[k]["logits"], ref["logits"])
            print(f"    max |dlogp| per position (f32 KV): {fmt_positions(d32)}")
            m16 = md.mean_dlogp(ours16[k]["logits"], ref["logits"])
            line = f"    max |dlogp| f32 KV {d32.max():.2e}, f16 KV {d16.max():.2e} (mean {m16:.2e})"
            if llama:
                line += (f"; llama.cpp f16 KV {llama['f16'][k].max():.2e} (mean {llama['mean16'][k]:.2e}), "
                         f"f32 KV {llama['f32'][k].max():.2e}")
                # the bound of tests/models/test_gemma4_oracle.py (its f16 test says why)
                ok = ok and m16 <= llama["mean16"][k] and d16.max() <= 1.5 * llama["f16"][k].max()
            print(line)
            ok = ok and good and d32.max() <= fam["logp_bound"]
        kv_type, bound = "f32", fam["logp_bound"]
    else:
        print("  cactus: this model_probe has no --kv-type (no dump request): log-probabilities only, f16 KV")
        for k, (tokens, ref) in enumerate(zip(prompts, refs)):
            rows = md.score_logprobs(probe, gguf_path, tokens, n_vocab)
            theirs = md.log_softmax(ref["logits"])[:-1]
            d = np.max(np.abs(rows - theirs), axis=-1)
            agree = int(np.sum(np.argmax(rows, axis=1) == np.argmax(theirs, axis=1)))
            line = (f"  prompt {k} ({len(tokens)} tokens): max |dlogp| {d.max():.2e}, "
                    f"mean {np.mean(np.abs(rows - theirs)):.2e}, argmax agree {agree}/{len(theirs)}")
            if llama:
                line += f"; llama.cpp f16 KV {llama['f16'][k][:-1].max():.2e}, f32 KV {llama['f32'][k][:-1].max():.2e}"
            print(line)
            print(f"    per position: {fmt_positions(d)}")
            ok = ok and d.max() <= F16_BOUND and agree >= len(theirs) - 1
        kv_type, bound = None, F16_BOUND
    tokens, ref = prompts[-1], refs[-1]
    rows = md.decode_logprobs(probe, gguf_path, tokens[:DECODE_SPLIT], tokens[DECODE_SPLIT:], n_vocab, DECODE_CHUNK,
                              kv_type=kv_type)
    d = np.max(np.abs(rows - md.log_softmax(ref["logits"])[DECODE_SPLIT - 1:-1]), axis=-1)
    print(f"  decode path (prompt {len(prompts) - 1}: {DECODE_SPLIT} tokens in chunks of {DECODE_CHUNK}, then one at a "
          f"time, {kv_type or 'f16'} KV): max |dlogp| {d.max():.2e}")
    return ok and d.max() <= bound, "checked"


def check_case(name, fam, case, args, workdir):
    model = fam["build"](case)
    n_vocab = model.config.vocab_size
    hf_dir = os.path.join(workdir, f"{name}-{case['label']}")
    model.save_pretrained(hf_dir, safe_serialization=True)
    if "dir_files" in fam:
        fam["dir_files"](hf_dir)
    conv_path = hf_dir + ".gguf"
    convert_f32(args.sdist, hf_dir, conv_path, fam["arch"], fam["set_vocab"])
    prompts = fam["prompts"](case)
    refs = [reference_dump(model, tokens, fam["taps"](model)) for tokens in prompts]
    print(f"\n{name} {case['label']} (seed {case['seed']}, vocabulary {n_vocab}, prompts of "
          f"{[len(p) for p in prompts]} tokens):")
    ok = True
    if name == "gemma4":
        ok = gemma4_extras(case, hf_dir, conv_path, workdir, refs, prompts, args.write_golden)
    tokens = prompts[-1]
    hf_rows = reference_decode(model, tokens, DECODE_SPLIT, DECODE_CHUNK)
    if hf_rows is not None:
        d = md.max_dlogp(hf_rows, refs[-1]["logits"][DECODE_SPLIT - 1:-1])
        print(f"  transformers' own cached path vs its full forward: max |dlogp| {d.max():.2e}")
    llama = None
    if args.llama_python:
        logits = {kv: llama_cpp_logits(args.llama_python, conv_path, prompts, kv) for kv in ("f16", "f32")}
        llama = {kv: [md.max_dlogp(l, r["logits"]) for l, r in zip(logits[kv], refs)] for kv in ("f16", "f32")}
        llama["mean16"] = [md.mean_dlogp(l, r["logits"]) for l, r in zip(logits["f16"], refs)]
        print("  llama.cpp vs transformers, max |dlogp| per prompt: f16 KV "
              + " ".join(f"{d.max():.2e}" for d in llama["f16"]) + "; f32 KV "
              + " ".join(f"{d.max():.2e}" for d in llama["f32"]))
    good, status = cactus_side(fam, args.probe, conv_path, prompts, refs, n_vocab, workdir, llama)
    return ok and good, status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdist", required=True, help="unpacked llama_cpp_python-0.3.36 sdist")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="build folder with bin/model_probe")
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES), help="repeatable; default: all")
    ap.add_argument("--write-golden", action="store_true", help=f"gemma4: rewrite {os.path.relpath(GOLDEN, REPO)}")
    ap.add_argument("--llama-python", default=os.path.expanduser("~/.cache/cactus/oracle/venv/bin/python"),
                    help="a python with llama_cpp, to score the same files with llama.cpp ('' = skip)")
    args = ap.parse_args()
    args.probe = os.path.join(args.build, "bin", "model_probe")
    if args.llama_python and not python_has(args.llama_python, "llama_cpp"):
        print(f"llama.cpp's distances not shown: no llama_cpp in {args.llama_python}")
        args.llama_python = ""
    if not os.path.exists(args.probe):
        sys.exit(f"check_transformers: no {args.probe} (build the model_probe target)")
    import transformers

    print(f"transformers {transformers.__version__}, torch {torch.__version__}, probe {args.probe}")
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.family or sorted(FAMILIES):
            for case in FAMILIES[name]["cases"]:
                results.append((f"{name} {case['label']}",) + check_case(name, FAMILIES[name], case, args, workdir))
    print()
    for label, ok, status in results:
        print(f"{label}: {'PASS' if ok else 'FAIL'}{'' if status == 'checked' else ' (cactus ' + status + ')'}")
    sys.exit(0 if all(ok for _, ok, _ in results) else 1)


if __name__ == "__main__":
    main()
