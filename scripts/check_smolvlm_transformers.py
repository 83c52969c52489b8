"""One-off cross-check of SmolVLM's (idefics3) image path against Hugging Face transformers (outside CI:
needs the torch venv of scripts/check_transformers.sh plus torchvision and Pillow, which
transformers' Idefics3ImageProcessor and Idefics3ImageProcessorPil use).

Chain: a random-init Idefics3ForConditionalGeneration from a small config (SigLIP 3 x 128 at the
real 512-px images and 16-px patches, scale_factor 4 pixel shuffle: 64 tokens per part; llama text
4 x 256 with an untied head) -> llama.cpp's converter (convert_hf_to_gguf.py --mmproj from the
llama-cpp-python 0.3.36 sdist, f32; the language model alone as a LlamaForCausalLM with the test
vocabulary of tests/models/vision/make_vlm_gguf.py) -> ours (bin/vision_probe encode / generate), against
transformers on the same images:

  (a) the prompt layout: Idefics3Processor.replace_image_token (the processor's own expansion of
      <image>, with the image processor's rows/cols) against our layout's text, and the number of
      <image> tokens;
  (b) the preprocessed pixels of every part (tiles row-major, then the global image), in 8-bit
      levels, against both of transformers' backends: Idefics3ImageProcessor (torchvision, the
      default) and Idefics3ImageProcessorPil (Pillow);
  (c) the projector output per part: get_image_features on each backend's pixel_values
      (max |difference| / max |transformers|);
  (d) the log-probabilities of the token after the image's prompt (no BOS, the prompt ids that
      vision_probe generate reports, <image> rows filled by transformers' own merger): the full
      Idefics3ForConditionalGeneration forward with input_ids + pixel_values, KL against ours.

Beside them, llama.cpp's libmtmd on the same files (the oracle venv): its embeddings per part and its
first-token log-probabilities, KL against transformers.

Two processor configurations: the released SmolVLM-256M/500M one (longest_edge 2048, 512-px tiles)
and longest_edge 512 (a single tile: transformers emits only the global image).

  scripts/check_smolvlm_transformers.sh     (torch venv + torchvision, sdist, then runs this)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "vision"))
import vision_images  # noqa: E402
from hf_check_common import converter_on_path, kl, log_softmax, run_converter, save_text_model  # noqa: E402

# The test vocabulary of tests/models/vision/make_vlm_gguf.py (tokens, scores, types), set by main() once the
# sdist's gguf-py (the converter needs its own) is first on the path: make_vlm_gguf imports gguf.
VOCAB, INDEX, IMAGE_ID = None, None, None
N_EMBD_TEXT = 256
SIDE = 512
# (longest_edge, [(w, h), ...]): the released geometry (every image is scaled to 2048 on its long
# side, so always tiled) and a single-tile one.
CASES = [(2048, [(1024, 768), (700, 4000), (33, 17)]), (512, [(640, 480), (300, 500)])]


def random_idefics3(seed):
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration

    torch.manual_seed(seed)
    config = Idefics3Config(
        vision_config=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=3, num_attention_heads=4,
                           image_size=SIDE, patch_size=16, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6),
        text_config=dict(model_type="llama", vocab_size=len(VOCAB[0]), hidden_size=N_EMBD_TEXT, intermediate_size=512,
                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                         max_position_embeddings=4096, tie_word_embeddings=False, pad_token_id=0,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        scale_factor=4, image_token_id=IMAGE_ID, tie_word_embeddings=False)
    config._attn_implementation = "eager"
    model = Idefics3ForConditionalGeneration(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
            elif "position_embedding" in name:
                p.copy_(0.5 * torch.randn_like(p))
            elif "embed_tokens" in name:
                p.copy_(torch.randn_like(p))
            elif "lm_head" in name:  # logits spread by ~3 (neither flat nor one-hot)
                p.copy_(3.0 * torch.randn_like(p) / np.sqrt(p.shape[1]))
            elif p.dim() >= 2:
                p.copy_(torch.randn_like(p) / np.sqrt(p[0].numel()))
    return model


def processors(longest_edge):
    from transformers import Idefics3ImageProcessor, Idefics3ImageProcessorPil

    kw = dict(size={"longest_edge": longest_edge}, max_image_size={"longest_edge": SIDE}, image_mean=[0.5] * 3,
              image_std=[0.5] * 3, resample=1)  # SmolVLM's preprocessor_config (LANCZOS)
    return {"torchvision": Idefics3ImageProcessor(**kw), "pil": Idefics3ImageProcessorPil(**kw)}


def prompt_string(image_proc, rgb):
    """The processor's expansion of one <image> (Idefics3Processor.replace_image_token, the code its
    __call__ runs), with a WordLevel tokenizer over the test vocabulary (only its marker ids are read)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import Idefics3Processor, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(INDEX, unk_token="<unk>")), unk_token="<unk>")
    proc = Idefics3Processor(image_processor=image_proc, tokenizer=tok, image_seq_len=(SIDE // 16 // 4) ** 2)
    out = image_proc(images=[[rgb]], return_row_col_info=True)
    return proc.replace_image_token(out, 0)


def save_hf(model, image_proc, hf_dir):
    model.save_pretrained(hf_dir, safe_serialization=True)
    image_proc.save_pretrained(hf_dir)


def convert_text(model, workdir, out_path, sdist):
    """The language model alone as a LlamaForCausalLM (untied head), through the converter with the
    test vocabulary (SPM, markers included) in place of a tokenizer file."""
    from transformers import LlamaForCausalLM

    hf_dir = os.path.join(workdir, "text")
    save_text_model(LlamaForCausalLM, model.config.text_config, model.model.text_model.state_dict(),
                    model.lm_head.weight, hf_dir)
    converter_on_path(sdist)
    from conversion import get_model_class

    tokens, scores, types = VOCAB

    def set_vocab(self):
        self.gguf_writer.add_tokenizer_model("llama")
        self.gguf_writer.add_token_list(tokens)
        self.gguf_writer.add_token_scores(scores)
        self.gguf_writer.add_token_types(types)
        self.gguf_writer.add_bos_token_id(1)
        self.gguf_writer.add_eos_token_id(2)
        self.gguf_writer.add_unk_token_id(0)
        self.gguf_writer.add_add_bos_token(True)

    get_model_class("LlamaForCausalLM").set_vocab = set_vocab
    run_converter(sdist, [hf_dir, "--outfile", out_path, "--outtype", "f32"])


def transformers_parts(model, image_proc, rgb):
    """Per part in transformers' order (tiles row-major, then the global image): (pixels [h, w, 3]
    in 0..255 as float, embeddings [64, n_embd]); and the processor's pixel_values."""
    out = image_proc(images=[[rgb]], return_tensors="pt")
    pv = out["pixel_values"]  # [1, parts, 3, 512, 512]
    with torch.no_grad():
        feats = model.model.get_image_features(pixel_values=pv, pixel_attention_mask=out["pixel_attention_mask"])
    feats = feats.pooler_output[0].reshape(pv.shape[1], -1, N_EMBD_TEXT)
    parts = [(((pv[0, k].permute(1, 2, 0).double().numpy() * 0.5 + 0.5) * 255.0), feats[k].double().numpy())
             for k in range(pv.shape[1])]
    return parts, out


def ours_encode(probe, mmproj, png, prefix):
    """Our parts in transformers' order (vision_probe writes the global image first) and the layout."""
    r = subprocess.run([probe, "encode", mmproj, png, prefix, "--threads", "1"], capture_output=True, text=True)
    meta = json.loads(r.stdout)
    if "error" in meta:
        sys.exit("vision_probe: " + meta["error"])
    n, d = meta["parts"], meta["n_embd"]
    embd = np.fromfile(prefix + ".f32", np.float32).reshape(n, -1, d).astype(np.float64)
    rgb = np.fromfile(prefix + ".rgb", np.uint8).reshape(n, SIDE, SIDE, 3).astype(np.float64)
    parts = [(rgb[k], embd[k]) for k in range(n)]
    return parts[1:] + parts[:1], meta


def our_prompt_string(meta):
    n_tok = meta["tokens_per_part"]
    return "".join(p["text"] if "text" in p else "<image>" * n_tok for p in meta["layout"])


def ours_first_logits(probe, text, mmproj, png, out_f32):
    r = subprocess.run([probe, "generate", text, mmproj, png, out_f32, "--n", "1", "--chunk", "64", "--threads", "1"],
                       capture_output=True, text=True)
    meta = json.loads(r.stdout)
    if "error" in meta:
        sys.exit("vision_probe: " + meta["error"])
    return log_softmax(np.fromfile(out_f32, np.float32)), meta["tokens"]


def transformers_first_logits(model, ids, processed):
    """The full model: input_ids (<image> at the image rows) + the processor's pixel_values; the
    merger puts the image features in order (tiles, then the global image)."""
    input_ids = torch.tensor([[IMAGE_ID if t < 0 else t for t in ids]])
    with torch.no_grad():
        logits = model(input_ids=input_ids, pixel_values=processed["pixel_values"],
                       pixel_attention_mask=processed["pixel_attention_mask"]).logits[0, -1]
    return log_softmax(logits.double().numpy())


def mtmd_run(oracle_python, code, args):
    """A snippet with mtmd_oracle imported, in the oracle venv (llama-cpp-python 0.3.36's libmtmd)."""
    vision_tests = os.path.join(REPO, "tests", "models", "vision")
    prelude = "import sys, numpy as np; sys.path.insert(0, %r); import mtmd_oracle;" % vision_tests
    subprocess.run([oracle_python, "-c", prelude + code % args], check=True, capture_output=True)


def mtmd_first_logits(oracle_python, text, mmproj, npy, out_npy):
    mtmd_run(oracle_python, "first, _ = mtmd_oracle.mtmd_generate(%r, %r, np.load(%r), n_gen=1, n_threads=1);"
             "np.save(%r, first)", (text, mmproj, npy, out_npy))
    return log_softmax(np.load(out_npy))


def mtmd_parts(oracle_python, text, mmproj, npy, out_npz):
    """libmtmd's image chunks in prompt order (tiles, then the global image)."""
    mtmd_run(oracle_python, "ref = mtmd_oracle.mtmd_layout(%r, %r, np.load(%r), n_threads=1);"
             "np.savez(%r, *[v for k, v in ref if k == 'image'])", (text, mmproj, npy, out_npz))
    z = np.load(out_npz)
    return [z[f"arr_{i}"].astype(np.float64) for i in range(len(z.files))]


def top5(x):
    return [int(t) for t in np.argsort(-x)[:5]]


def check_image(model, procs, probe, mmproj, text, d, w, h, seed, oracle_python):
    rgb = vision_images.image(w, h, seed)
    png = os.path.join(d, f"img{seed}.png")
    vision_images.write_png(png, rgb)
    np.save(png + ".npy", rgb)
    mtmd, llama = [], None
    if oracle_python:
        mtmd = mtmd_parts(oracle_python, text, mmproj, png + ".npy", os.path.join(d, "m.npz"))
        llama = mtmd_first_logits(oracle_python, text, mmproj, png + ".npy", os.path.join(d, "m.npy"))
    ours, meta = ours_encode(probe, mmproj, png, os.path.join(d, "o"))
    mine, ids = ours_first_logits(probe, text, mmproj, png, os.path.join(d, "l.f32"))
    n_image = sum(1 for t in ids if t < 0)
    print(f"{w}x{h}: grid {meta['grid_x']}x{meta['grid_y']}, {len(ours)} part(s), {len(ids)} prompt tokens "
          f"({n_image} image rows); libmtmd: {len(mtmd)} part(s)", flush=True)
    refs = {}
    for backend, proc in procs.items():
        theirs, processed = transformers_parts(model, proc, rgb)
        layout = prompt_string(proc, rgb)
        same_layout = layout == our_prompt_string(meta)
        print(f"  [{backend}] layout {'identical' if same_layout else 'DIFFERS'} "
              f"({layout.count('<image>')} vs {our_prompt_string(meta).count('<image>')} <image>), "
              f"{len(theirs)} part(s)")
        if not same_layout:
            print("    transformers:", repr(layout.replace("<image>" * 64, "<image>*64")))
            print("    cactus:      ", repr(our_prompt_string(meta).replace("<image>" * 64, "<image>*64")))
        for k, (tp, te) in enumerate(theirs):
            name = "global" if k == len(theirs) - 1 else f"tile {k}"
            if k >= len(ours):
                print(f"    {name:8s}: no cactus part")
                continue
            op, oe = ours[k]
            diff = np.abs(op - tp)
            line = (f"    {name:8s}: pixels max {diff.max():5.2f} levels, mean {diff.mean():.4f}, "
                    f"{(diff > 0.5).mean() * 100:.2f}% differ; embd {np.abs(oe - te).max() / np.abs(te).max():.2e}")
            if len(mtmd) == len(theirs):
                line += f" | libmtmd embd {np.abs(mtmd[k] - te).max() / np.abs(te).max():.2e}"
            print(line)
        if same_layout:
            ref = refs[backend] = transformers_first_logits(model, ids, processed)
            line = (f"    first token: KL(transformers || cactus) {kl(ref, mine):.2e}; top-5 transformers {top5(ref)}, "
                    f"cactus {top5(mine)}")
            if llama is not None:
                line += f"; KL(transformers || llama.cpp) {kl(ref, llama):.2e}, top-5 {top5(llama)}"
            print(line, flush=True)
    if len(refs) == 2:
        print(f"  transformers' backends: KL(pil || torchvision) {kl(refs['pil'], refs['torchvision']):.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdist", required=True, help="unpacked llama_cpp_python-0.3.36 sdist")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--llama-python", default=os.path.expanduser("~/.cache/cactus/oracle/venv/bin/python"),
                    help="the oracle venv's python (libmtmd columns); '' to leave them out")
    args = ap.parse_args()
    probe = os.path.join(args.build, "bin", "vision_probe")
    converter_on_path(args.sdist)
    import make_vlm_gguf as mk

    global VOCAB, INDEX, IMAGE_ID
    VOCAB = mk.text_vocab(mk.IDEFICS3_SPECIALS)
    INDEX = {t: i for i, t in enumerate(VOCAB[0])}
    IMAGE_ID = INDEX["<image>"]
    torch.set_num_threads(1)
    model = random_idefics3(7)
    with tempfile.TemporaryDirectory() as d:
        text = os.path.join(d, "text.gguf")
        convert_text(model, d, text, args.sdist)
        for longest_edge, sizes in CASES:
            procs = processors(longest_edge)
            hf_dir = os.path.join(d, f"hf{longest_edge}")
            save_hf(model, procs["torchvision"], hf_dir)
            mmproj = os.path.join(d, f"mmproj{longest_edge}.gguf")
            run_converter(args.sdist, [hf_dir, "--outfile", mmproj, "--outtype", "f32", "--mmproj"])
            shutil.rmtree(hf_dir)
            print(f"== longest_edge {longest_edge}, tiles {SIDE} px ==")
            for seed, (w, h) in enumerate(sizes):
                check_image(model, procs, probe, mmproj, text, d, w, h, seed, args.llama_python)


if __name__ == "__main__":
    main()
