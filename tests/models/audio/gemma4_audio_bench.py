"""Gemma 4 audio encode speed: bin/gemma4_audio_probe against llama.cpp's libmtmd on the E2B-shaped audio tower
(make_gemma4_mmproj.py --shape e2b --towers audio --type f16 --proj-dim 128: the real widths and F16 matrices;
projection 128 so libmtmd can pair it with the tiny text model, which leaves out a 1536 x 128 product instead of
1536 x 1536, under 1% of the work). By hand, oracle venv:

    CACTUS_BUILD_DIR=$PWD/build ~/.cache/cactus/oracle/venv/bin/python tests/models/audio/gemma4_audio_bench.py \\
        [--seconds 10,30] [--threads 1,2] [--rounds 3]

Each (length, threads) runs both engines alternately for `rounds` rounds (2 encodes each after one warm-up
encode), and reports the minimum and the median over rounds of the wall and CPU milliseconds of each engine and the
speed-ups (libmtmd / ours) of both. GEMMA4_AUDIO_PROBE names another probe binary (an older build, for before/after
runs)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.environ.get("GEMMA4_AUDIO_PROBE", os.path.join(BUILD_DIR, "bin", "gemma4_audio_probe"))


def clip(seconds):
    t = np.arange(int(16000 * seconds)) / 16000.0
    x = 0.3 * np.sin(2 * np.pi * 440.0 * t) + 0.05 * np.random.default_rng(0).standard_normal(t.size)
    return x.astype(np.float32)


def ours(mmproj, path, threads, out_dir):
    r = subprocess.run([PROBE, "encode", mmproj, path, out_dir, "--threads", str(threads), "--repeats", "2"],
                       capture_output=True, text=True, timeout=600)
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert "error" not in info, info
    return min(info["encode_ms"]), min(info["encode_cpu_ms"])


def theirs(text, mmproj, samples, threads):
    import gemma4_mtmd_audio
    from llama_cpp import mtmd_cpp as m

    orig, times = m.mtmd_encode_chunk, []

    def timed(ctx, chunk):
        c0, w0 = time.process_time(), time.perf_counter()
        rc = orig(ctx, chunk)
        times.append(((time.perf_counter() - w0) * 1000, (time.process_time() - c0) * 1000))
        return rc

    m.mtmd_encode_chunk = timed
    try:
        gemma4_mtmd_audio.mtmd_audio_chunks(text, mmproj, samples, threads, repeats=3)
    finally:
        m.mtmd_encode_chunk = orig
    return min(t[0] for t in times[1:]), min(t[1] for t in times[1:])


def main():
    import gemma4_tiny
    import make_gemma4_mmproj

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", default="10,30")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mmproj, text = os.path.join(tmp, "mmproj-e2b-audio.gguf"), os.path.join(tmp, "text-tiny.gguf")
        make_gemma4_mmproj.write_mmproj(mmproj, "e2b", ("audio",), "f16", 0, 128)
        gemma4_tiny.write_gguf(text)
        rows = []
        for seconds in map(float, args.seconds.split(",")):
            samples = clip(seconds)
            path = os.path.join(tmp, "clip.f32")
            samples.tofile(path)
            for threads in map(int, args.threads.split(",")):
                a, b = [], []
                for _ in range(args.rounds):
                    a.append(ours(mmproj, path, threads, tmp))
                    b.append(theirs(text, mmproj, samples, threads))
                ow, oc = min(x[0] for x in a), min(x[1] for x in a)
                tw, tc = min(x[0] for x in b), min(x[1] for x in b)
                mow, mtw = np.median([x[0] for x in a]), np.median([x[0] for x in b])
                rows.append(dict(seconds=seconds, threads=threads, ours_ms=round(ow), ours_cpu_ms=round(oc),
                                 mtmd_ms=round(tw), mtmd_cpu_ms=round(tc), speedup=round(tw / ow, 2),
                                 ours_median_ms=round(mow), mtmd_median_ms=round(mtw),
                                 median_speedup=round(mtw / mow, 2)))
                print(json.dumps(rows[-1]), flush=True)
        print("| audio | threads | cactus ms (cpu) | libmtmd ms (cpu) | speed-up | medians: cactus, libmtmd, speed-up |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['seconds']:g} s | {r['threads']} | {r['ours_ms']} ({r['ours_cpu_ms']}) | "
                  f"{r['mtmd_ms']} ({r['mtmd_cpu_ms']}) | {r['speedup']:.2f}x | {r['ours_median_ms']}, "
                  f"{r['mtmd_median_ms']}, {r['median_speedup']:.2f}x |")


if __name__ == "__main__":
    main()
