#!/usr/bin/env python3
"""The files of the GPU image-encode comparison (scripts/device_visit.sh with IMAGE=1), as skeletons
that travel light: SmolVLM-256M's and LFM2-VL-450M's vision towers at real widths with random f16
weights (tests/models/vision/make_vlm_gguf.py: IDEFICS3_REAL with a 512-px longest edge, so a
512x512 image is one part, and LFM2_REAL), the small text models libmtmd pairs them with, and that
image. Each GGUF becomes OUT/skel_NAME.head.gz + OUT/skel_NAME.json (../shared/tools/gguf_skeleton.py,
about 40 KB in all); gguf_fill.py rebuilds the same layouts on the device.

    ~/.cache/cactus/oracle/venv/bin/python bench/vlm_skeletons.py [--out .dev/vlm]
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "vision"))
import make_vlm_gguf as mk  # noqa: E402
import vision_images  # noqa: E402

SKELETON = os.path.join(os.path.dirname(REPO), "shared", "tools", "gguf_skeleton.py")


def write_models(d):
    """The four GGUFs in directory d: {name: path}."""
    paths = {n: os.path.join(d, n + ".gguf") for n in ("smolvlm_mmproj", "smolvlm_text", "lfm2vl_mmproj", "lfm2vl_text")}
    hp = dict(mk.IDEFICS3_REAL, longest_edge=512)
    mk.write_idefics3_mmproj(paths["smolvlm_mmproj"], hp, seed=1, f16=True)
    mk.write_llama_text(paths["smolvlm_text"], hp["proj_dim"], mk.IDEFICS3_SPECIALS)
    mk.write_lfm2_mmproj(paths["lfm2vl_mmproj"], mk.LFM2_REAL, seed=1, f16=True)
    mk.write_lfm2_text(paths["lfm2vl_text"])
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, ".dev", "vlm"))
    ap.add_argument("--skeleton-tool", default=SKELETON)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        for name, path in write_models(d).items():
            prefix = os.path.join(a.out, "skel_" + name)
            subprocess.run([sys.executable, a.skeleton_tool, path, prefix], check=True)
            with open(prefix + ".head", "rb") as src, gzip.open(prefix + ".head.gz", "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            os.remove(prefix + ".head")
    vision_images.write_png(os.path.join(a.out, "img.png"), vision_images.image(512, 512, 0))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
