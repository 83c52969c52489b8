#!/usr/bin/env python3
"""History rows from the output of scripts/device_visit.sh (a GPU visit): per model, the pp512 and
tg128 medians of `cactus bench --device cuda` ("ours:" lines; with "ours again:" the two medians are
averaged) beside llama-bench -ngl 99's ("llama:" lines, when the visit built llama.cpp).

    python3 bench/device_rows.py VISIT.log --date 2026-12-07T11:20:00 [--commit abc1234] [--append]

Without --append the rows are printed (one JSON object a line); with it they go to
bench/results/history.jsonl. The card is read from the log's first line (nvidia-smi)."""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402

QUANTS = {"smollm2-135m.gguf": "Q4_1", "gemma3-270m.gguf": "Q4_K - Medium", "qwen2.5-coder-0.5b.gguf": "Q4_K - Medium",
          "qwen2.5-coder-1.5b.gguf": "Q4_K - Medium"}
HOST = "Intel Xeon (Sapphire Rapids class, AMX), 16 vCPU"
PEER = "llama.cpp CUDA (llama-bench -ngl 99, llama-cpp-python 0.3.36 sdist)"
SOURCE = ("bench/device_rows.py from a scripts/device_visit.sh log: cactus bench --device cuda -p 512 -n 128 -r 3 and "
          "llama-bench -p 512 -n 128 -r 3, alternated")


def parse(text):
    """{file: {test: {"ours": [medians], "peer": [t/s]}}} and the card's name, driver."""
    first = text.splitlines()[0].split(",") if text.strip() else ["unknown"]
    card = first[0].strip()
    driver = first[1].strip() if len(first) > 1 else None
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"## \S+ (\S+)$", line)
        if m and m.group(1).endswith(("135m", "270m", "0.5b", "1.5b")):
            current = out.setdefault(m.group(1) + ".gguf", {})
            continue
        if current is None:
            continue
        m = re.match(r"ours(?: again)?:\s+\d+ \| (pp512|tg128)\s+\|\s+([\d.]+)", line)
        if m:
            current.setdefault(m.group(1), {"ours": [], "peer": []})["ours"].append(float(m.group(2)))
            continue
        m = re.match(r"llama: \|.*\|\s+(pp512|tg128)\s+\|\s+([\d.]+)", line)
        if m:
            current.setdefault(m.group(1), {"ours": [], "peer": []})["peer"].append(float(m.group(2)))
    return out, card, driver


def rows(text, date, commit):
    found, card, driver = parse(text)
    out = []
    for file, tests in found.items():
        for test, v in sorted(tests.items()):
            if not v["ours"]:
                continue
            peer = sum(v["peer"]) / len(v["peer"]) if v["peer"] else None
            out.append(history.make_row(
                date=date, commit=commit, cpu=HOST, tier=card, device="cuda", file=file, quant=QUANTS.get(file),
                threads=8, test=test, ours=round(sum(v["ours"]) / len(v["ours"]), 1),
                peer=round(peer, 1) if peer else None, peer_name=PEER if peer else None, unit="tok/s",
                source=SOURCE, extra={"driver": driver, "cuda": "sm_90",
                                      "weights": "random fill of the real layout (gguf_fill.py)",
                                      "note": "medians of 3; ours: the mean of the runs before and after llama-bench"}))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--append", action="store_true")
    args = ap.parse_args()
    with open(args.log) as f:
        found = rows(f.read(), args.date, args.commit or history.git_commit())
    if not found:
        sys.exit("no bench lines in %s" % args.log)
    if args.append:
        history.append_rows(found, history.HISTORY)
    for r in found:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
