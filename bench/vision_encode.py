#!/usr/bin/env python3
"""Image encode time, cactus (bin/vision_probe) vs llama.cpp's libmtmd (llama-cpp-python 0.3.36),
on a real-width random-weight SmolVLM-256M vision tower (SigLIP 12 x 768 at 512 px, shuffle 4,
projection to 576), one 512x512 image, per 512-px part, alternated runs, 1 and 2 threads.
The mmproj's longest edge is set to 512 so the image is a single part (libmtmd encodes a tile and
the global image: both are timed per part).

--family lfm2: LFM2-VL-450M's shape instead (SigLIP2 NaFlex 12 x 768, the position grid resized to
32 x 32 patches, pixel unshuffle 2, MLP 3072 -> 2560 -> 1024; lfm2 text model for libmtmd): one
512x512 image = one part of 256 tokens for both.

  bench/vision_encode.py [--runs 3] [--threads 1 2] [--family idefics3|lfm2]
      (oracle venv python; build/bin/vision_probe)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "vision"))
import make_vlm_gguf as mk  # noqa: E402
import mtmd_oracle  # noqa: E402
import vision_images  # noqa: E402

PROBE = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "vision_probe")


def ours(mmproj, img, threads, out):
    r = subprocess.run([PROBE, "encode", mmproj, img, out, "--threads", str(threads)], capture_output=True,
                       text=True, check=True)
    meta = json.loads(r.stdout)
    return meta["encode_ms"] / meta["parts"]


def theirs(text, mmproj, rgb, threads):
    ms = []
    mtmd_oracle.mtmd_layout(text, mmproj, rgb, n_threads=threads, encode_ms=ms)
    return sum(ms) / len(ms)  # mtmd_encode_chunk only (after libmtmd's warm-up encode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--family", choices=["idefics3", "lfm2"], default="idefics3")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mmproj, text = os.path.join(d, "mmproj.gguf"), os.path.join(d, "text.gguf")
        if a.family == "lfm2":
            mk.write_lfm2_mmproj(mmproj, mk.LFM2_REAL, seed=1, f16=True)
            mk.write_lfm2_text(text)
        else:
            hp = dict(mk.IDEFICS3_REAL, longest_edge=512)
            mk.write_idefics3_mmproj(mmproj, hp, seed=1, f16=True)
            mk.write_llama_text(text, hp["proj_dim"], mk.IDEFICS3_SPECIALS)
        rgb = vision_images.image(512, 512, 0)
        img = os.path.join(d, "img.png")
        vision_images.write_png(img, rgb)
        rows = []
        for t in a.threads:
            c, l = [], []
            for _ in range(a.runs):
                c.append(ours(mmproj, img, t, os.path.join(d, "o")))
                l.append(theirs(text, mmproj, rgb, t))
            rows.append({"threads": t, "cactus_ms_per_part": min(c), "libmtmd_ms_per_part": min(l),
                         "speedup": min(l) / min(c)})
        print(json.dumps(rows))
        for r in rows:
            print(f"{r['threads']} thread(s): cactus {r['cactus_ms_per_part']:.0f} ms, "
                  f"libmtmd {r['libmtmd_ms_per_part']:.0f} ms per 512-px part ({r['speedup']:.2f}x)")


if __name__ == "__main__":
    main()
