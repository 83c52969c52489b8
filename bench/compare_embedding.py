#!/usr/bin/env python3
"""Embedding throughput of cactus and llama.cpp's llama-embedding on the same GGUF, texts and threads.

Runs both ALTERNATELY (ABBA) so machine noise hits them alike. cactus: tests/tools/embed_bench (the
texts as one batch, median of --reps in one process, after a warm-up). llama.cpp: llama-embedding
has no in-process timer for embeddings (its prompt-eval time reads 0), so its time per batch is the
wall-time difference between a run over the texts repeated R times and a run over them once, both
with the same load and warm-up: (T_R - T_1) / (R - 1). Batches of up to --llama-batch tokens pack
as many texts as fit, as llama-embedding does.

Prints a table, writes one JSON row per (engine, threads, round) to --out and appends one row per thread
count (medians of texts/s) to bench/results/history.jsonl.
Usage: bench/compare_embedding.py --model ~/.cache/cactus/models/all-minilm-l6-v2.gguf \\
         --llama-embedding PATH [--texts FILE] [--threads 1,2] [--rounds 3] [--out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_texts():
    # The first 64 of the MiniLM golden sentences: varied lengths, ASCII and not (971 tokens).
    with open(os.path.join(REPO, "tests", "models", "data", "minilm_golden.json")) as f:
        sentences = json.load(f)["sentences"]
    return [s["text"].replace("\n", " ") for s in sentences[:64]]


def run_cactus(bench, model, texts_file, threads, reps):
    out = subprocess.run([bench, model, texts_file, str(reps), str(threads)], check=True, capture_output=True,
                         text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    return row["median_s"]


def wall(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def run_llama(binary, model, once_file, repeated_file, repeats, threads, batch):
    base = [binary, "-m", model, "-t", str(threads), "-b", str(batch), "-ub", str(batch), "-c", str(batch),
            "--pooling", "mean", "--embd-normalize", "2"]
    t1 = wall(base + ["-f", once_file])
    tr = wall(base + ["-f", repeated_file])
    return (tr - t1) / (repeats - 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--llama-embedding", required=True)
    p.add_argument("--embed-bench", default=os.path.join(REPO, "build", "bin", "embed_bench"))
    p.add_argument("--texts", help="one text per line (default: 64 golden sentences)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=10, help="cactus batches per run (median)")
    p.add_argument("--repeats", type=int, default=6, help="llama.cpp: the texts repeated this often in the long run")
    p.add_argument("--llama-batch", type=int, default=1024)
    p.add_argument("--isa", default="", help="CACTUS_CPU_ISA for cactus (e.g. avx2)")
    p.add_argument("--out")
    p.add_argument("--history", default=history.HISTORY, help="rows are appended here (default %(default)s)")
    p.add_argument("--no-history", action="store_true", help="do not append rows to the history file")
    a = p.parse_args()
    texts = open(a.texts).read().split("\n") if a.texts else default_texts()
    texts = [t for t in texts if t]
    tmp = tempfile.mkdtemp()
    once, repeated = os.path.join(tmp, "once.txt"), os.path.join(tmp, "repeated.txt")
    with open(once, "w") as f:
        f.write("\n".join(texts))
    with open(repeated, "w") as f:
        f.write("\n".join(texts * a.repeats))
    if a.isa:
        os.environ["CACTUS_CPU_ISA"] = a.isa
    rows = []
    for threads in [int(t) for t in a.threads.split(",")]:
        for r in range(a.rounds):
            order = ["cactus", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "cactus"]
            for engine in order:
                if engine == "cactus":
                    s = run_cactus(a.embed_bench, a.model, once, threads, a.reps)
                else:
                    s = run_llama(a.llama_embedding, a.model, once, repeated, a.repeats, threads, a.llama_batch)
                rows.append({"engine": engine, "threads": threads, "round": r, "texts": len(texts),
                             "seconds_per_batch": s, "texts_per_s": len(texts) / s,
                             "model": os.path.basename(a.model), "isa": a.isa or "native"})
    print("| threads | cactus texts/s | llama.cpp texts/s | ratio |")
    print("|---|---|---|---|")
    for threads in sorted({r["threads"] for r in rows}):
        med = {e: statistics.median(r["texts_per_s"] for r in rows if r["threads"] == threads and r["engine"] == e)
               for e in ("cactus", "llama.cpp")}
        print("| %d | %.1f | %.1f | %.2fx |" % (threads, med["cactus"], med["llama.cpp"], med["cactus"] / med["llama.cpp"]))
    if a.out:
        with open(a.out, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    if not a.no_history:
        history.append_rows(history_rows(rows, a), a.history)


def history_rows(rows, a):
    """One history row per thread count: medians of both engines' texts/s, every sample in extra."""
    out, date, commit = [], history.now(), history.git_commit()
    cpu, tier = history.local_cpu(), history.local_tier(a.isa)
    for threads in sorted({r["threads"] for r in rows}):
        ours = [r["texts_per_s"] for r in rows if r["threads"] == threads and r["engine"] == "cactus"]
        theirs = [r["texts_per_s"] for r in rows if r["threads"] == threads and r["engine"] != "cactus"]
        out.append(history.make_row(
            date=date, commit=commit, cpu=cpu, tier=tier, device="cpu", file=os.path.basename(a.model),
            threads=threads, test="embed %d texts" % rows[0]["texts"], ours=statistics.median(ours),
            peer=statistics.median(theirs), peer_name="llama.cpp llama-embedding", unit="texts/s",
            source="bench/compare_embedding.py", extra={"ours_samples": ours, "peer_samples": theirs}))
    return out


if __name__ == "__main__":
    main()
