#!/usr/bin/env python3
"""Writes a random-weight Gemma 4 mmproj GGUF (vision and/or audio tower) exactly as llama.cpp's
converter writes one (conversion/gemma.py Gemma4VisionAudioModel + MmprojModel): general.architecture
"clip", general.type "mmproj", clip.has_vision_encoder / clip.has_audio_encoder, the clip.vision.* /
clip.audio.* keys, the converter's tensor names and types. Numpy only (plus the `gguf` package).

  make_gemma4_mmproj.py --shape tiny|e2b [--towers vision,audio] [--type f32|f16] [--seed N]
                        [--proj-dim D] -o FILE

--proj-dim is the text model's n_embd (128 for tests/models/gemma4_tiny.py, 1536 for E2B; the default
follows the shape). The towers come from scripts/gemma4_vision_tensors.py and
scripts/gemma4_audio_tensors.py, each with config(shape), gguf_kv(cfg), tensors(cfg, seed) and
hf_state_dict(tensors); the writer sets cfg["proj_dim"] before calling gguf_kv and tensors. A module
may also define force_f32(gguf_name) for tensors the converter keeps F32 in an F16 file.

Types as the converter's prepare_tensors gives them: with --type f16, 1-D tensors, *_norm.weight,
names not ending in .weight and the module's force_f32 names are F32, every other tensor F16
(v.patch_embd included: MmprojModel forces it to the file's 16-bit type); --type f32 writes all F32
(the oracle files)."""
import argparse
import importlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TOWER_MODULES = {"vision": "gemma4_vision_tensors", "audio": "gemma4_audio_tensors"}
DEFAULT_PROJ_DIM = {"tiny": 128, "e2b": 1536}
FILE_TYPE = {"f32": 0, "f16": 1}  # llama_ftype ALL_F32 / MOSTLY_F16


def tower_module(tower):
    return importlib.import_module(TOWER_MODULES[tower])


def tower_config(tower, shape, proj_dim):
    cfg = tower_module(tower).config(shape)
    cfg["proj_dim"] = proj_dim
    return cfg


def stored_dtype(module, name, array, file_type):
    if file_type == "f32" or array.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight"):
        return np.float32
    if getattr(module, "force_f32", lambda n: False)(name):
        return np.float32
    return np.float16


def _add_kv(writer, key, value):
    import gguf

    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    elif isinstance(value, (list, tuple)) and all(isinstance(v, float) for v in value):
        writer.add_array(key, [float(v) for v in value])
    elif isinstance(value, (list, tuple)):
        writer.add_key_value(key, [int(v) for v in value], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    else:
        raise ValueError(f"make_gemma4_mmproj: no GGUF type for {key} = {value!r}")


def write_mmproj(path, shape="tiny", towers=("vision",), file_type="f32", seed=0, proj_dim=None, extra_kv=None):
    """Writes the file; returns {tower: [(GGUF name, float32 array)]} (the values before any F16 cast).
    extra_kv: keys the converter does not write, added after its own (tests: clip.use_gelu)."""
    import gguf

    proj_dim = proj_dim or DEFAULT_PROJ_DIM[shape]
    writer = gguf.GGUFWriter(path, "clip")
    writer.add_type("mmproj")
    writer.add_name(f"gemma4 {shape} mmproj ({'+'.join(towers)}, seed {seed})")
    writer.add_file_type(FILE_TYPE[file_type])
    out = {}
    for tower in towers:
        module = tower_module(tower)
        cfg = tower_config(tower, shape, proj_dim)
        writer.add_bool(f"clip.has_{tower}_encoder", True)
        for key, value in module.gguf_kv(cfg).items():
            _add_kv(writer, key, value)
        out[tower] = module.tensors(cfg, seed)
        for name, array in out[tower]:
            writer.add_tensor(name, np.ascontiguousarray(array, dtype=stored_dtype(module, name, array, file_type)))
    for key, value in (extra_kv or {}).items():
        _add_kv(writer, key, value)
    writer.add_quantization_version(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(DEFAULT_PROJ_DIM), default="tiny")
    ap.add_argument("--towers", default="vision", help="vision, audio or vision,audio")
    ap.add_argument("--type", choices=sorted(FILE_TYPE), default="f16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--proj-dim", type=int, default=None)
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    towers = [t.strip() for t in args.towers.split(",") if t.strip()]
    unknown = [t for t in towers if t not in TOWER_MODULES]
    if not towers or unknown:
        ap.error(f"--towers: expected vision and/or audio, got {args.towers!r}")
    write_mmproj(args.out, args.shape, towers, args.type, args.seed, args.proj_dim)


if __name__ == "__main__":
    main()
