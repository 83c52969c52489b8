#!/usr/bin/env python3
"""Does a newcomer's first run answer right? Pass rate, time to first token and decode speed of
each pullable instruct model on short factual and instruction prompts, as `cactus run` gives them.

Every prompt of bench/data/first_run_prompts.jsonl (capitals, science, arithmetic; one-word and
number-only answers, lists, translations, JSON) goes through

    build/bin/cactus run MODEL -p PROMPT -n 64 [sampling flags]

as the README's quick start sends it (the default system message and chat template), under two
settings:

    default   no sampling flag: the CLI's defaults, which decode greedily (temperature 0)
    sampled   llama.cpp's defaults (--temperature 0.8 --top-k 40 --top-p 0.95 --min-p 0.05), one run
              per seed (--seeds; --model-seeds NAME=N gives a slow model fewer)

A reply passes when the prompt's `expect` regex matches it (case-insensitive unless the row says
"case": true; `^` and `$` anchor the whole reply, stripped). The default model (`cactus list` marks
it) is chosen on these pass rates: README.md, "Quick start".

Writes bench/results/first_run_<cpu-tag>.jsonl: a header row (date, commit, machine), one row per run
(model, setting, seed, prompt, pass, reply, ttft_ms, decode_tps) and one summary row per model and
setting; prints a markdown table. Times come from a shared machine: read them as rough sizes only.

    PY=~/.cache/cactus/oracle/venv/bin/python
    $PY bench/first_run.py                                       # 3 models, ~30 min on 2 cores
    $PY bench/first_run.py --models smollm2-135m --seeds 0       # greedy only, one model: ~1 min
    $PY bench/first_run.py --table bench/results/first_run_xeon-2core.jsonl   # print a past run
    $PY bench/first_run.py --rescore bench/results/first_run_xeon-2core.jsonl # its replies, checked again
                                                                  # against the prompts file's regexes
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_llama import find_cactus, git_commit, machine_summary  # noqa: E402
from compare_spec import cpu_tag  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = os.path.join(REPO, "bench", "data", "first_run_prompts.jsonl")

# The instruct models `cactus pull` knows (gemma3-270m is a base model: it continues text).
INSTRUCT_MODELS = ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]

SETTINGS = {
    "default": [],
    "sampled": ["--temperature", "0.8", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05"],
}

# cactus run's metrics line on stderr (tools/cli/cli_common.cpp, print_metrics):
#   [ttft 210.5 ms | prefill 37 tok @ 175.8 tok/s | decode 32 tok @ 17.3 tok/s | total 2000.0 ms]
METRICS_RE = re.compile(r"\[ttft ([0-9.]+) ms \| prefill (\d+) tok @ [0-9.]+ tok/s \| decode (\d+) tok @ ([0-9.]+) tok/s")


def load_prompts(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def passes(prompt, reply):
    flags = re.DOTALL | (0 if prompt.get("case") else re.IGNORECASE)
    return re.search(prompt["expect"], reply.strip(), flags) is not None


def run_once(cactus, model, prompt, setting, seed, args):
    cmd = [cactus, "run", model, "-p", prompt["prompt"], "-n", str(args.n_predict)] + SETTINGS[setting]
    if args.threads:
        cmd += ["-t", str(args.threads)]
    if setting != "default":
        cmd += ["--seed", str(seed)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        sys.exit("first_run: %s failed (%d):\n%s" % (" ".join(cmd), proc.returncode, proc.stderr[-2000:]))
    reply = proc.stdout.strip()
    m = METRICS_RE.search(proc.stderr)
    if not m:
        sys.exit("first_run: no metrics line in the stderr of %s:\n%s" % (" ".join(cmd), proc.stderr[-2000:]))
    return {"row": "run", "model": model, "setting": setting, "seed": seed if setting != "default" else None,
            "id": prompt["id"], "kind": prompt["kind"], "pass": passes(prompt, reply), "reply": reply,
            "ttft_ms": float(m.group(1)), "prompt_tokens": int(m.group(2)), "decode_tokens": int(m.group(3)),
            "decode_tps": float(m.group(4))}


def summarize(runs):
    """One summary row per (model, setting): pass rates overall and per kind, median TTFT and tok/s."""
    out = []
    keys = sorted({(r["model"], r["setting"]) for r in runs}, key=lambda k: (INSTRUCT_MODELS.index(k[0])
                                                                            if k[0] in INSTRUCT_MODELS else 99, k[1]))
    for model, setting in keys:
        rs = [r for r in runs if r["model"] == model and r["setting"] == setting]
        row = {"row": "summary", "model": model, "setting": setting, "runs": len(rs),
               "seeds": sorted({r["seed"] for r in rs if r["seed"] is not None}),
               "pass_rate": sum(r["pass"] for r in rs) / len(rs)}
        for kind in ("fact", "instruct"):
            ks = [r for r in rs if r["kind"] == kind]
            row["pass_rate_" + kind] = sum(r["pass"] for r in ks) / len(ks) if ks else None
        row["ttft_ms_median"] = statistics.median(r["ttft_ms"] for r in rs)
        timed = [r["decode_tps"] for r in rs if r["decode_tokens"] >= 4]  # a 1-token reply has no decode rate
        row["decode_tps_median"] = statistics.median(timed) if timed else None
        out.append(row)
    return out


def print_table(summaries, runs):
    print("| model | setting | runs | pass | facts | instructions | TTFT ms (median) | decode tok/s (median) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for s in summaries:
        pct = lambda v: "-" if v is None else "%.0f%%" % (100 * v)  # noqa: E731
        seeds = " (seeds %s)" % ",".join(map(str, s["seeds"])) if s["seeds"] else ""
        tps = "-" if s["decode_tps_median"] is None else "%.1f" % s["decode_tps_median"]
        print("| %s | %s%s | %d | %s | %s | %s | %.0f | %s |" % (s["model"], s["setting"], seeds, s["runs"],
                                                              pct(s["pass_rate"]), pct(s["pass_rate_fact"]),
                                                              pct(s["pass_rate_instruct"]), s["ttft_ms_median"], tps))
    failed = {}
    for r in runs:
        if not r["pass"] and r["setting"] == "default":
            failed.setdefault(r["model"], []).append(r["id"])
    for model, ids in failed.items():
        print("%s, default setting, failed: %s" % (model, ", ".join(ids)))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=INSTRUCT_MODELS)
    ap.add_argument("--prompts", default=PROMPTS)
    ap.add_argument("-n", "--n-predict", type=int, default=64, help="most tokens per reply (cactus run -n)")
    ap.add_argument("--seeds", type=int, default=3, help="sampled runs per prompt (0: the default setting only)")
    ap.add_argument("--model-seeds", action="append", default=[], metavar="NAME=N",
                    help="fewer sampled runs for a slow model, e.g. qwen2.5-coder-1.5b=1")
    ap.add_argument("-t", "--threads", type=int, default=0, help="cactus run -t (0: all cores)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--cactus", help="the cactus binary (default: $CACTUS_BUILD_DIR/bin/cactus or build/bin/cactus)")
    ap.add_argument("--out", help="result file (default: bench/results/first_run_<cpu-tag>.jsonl)")
    ap.add_argument("--table", metavar="FILE", help="print the table of a result file and exit")
    ap.add_argument("--rescore", metavar="FILE",
                    help="check a result file's replies again against --prompts (after a regex is corrected), "
                    "rewrite its pass and summary rows and print the table")
    return ap.parse_args()


def read_rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def write_rows(path, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print("first_run: wrote %s" % os.path.relpath(path, REPO))


def rescore(path, prompts_path):
    rows = read_rows(path)
    prompts = {p["id"]: p for p in load_prompts(prompts_path)}
    header = next(r for r in rows if r["row"] == "header")
    runs = [r for r in rows if r["row"] == "run"]
    for r in runs:
        r["pass"] = passes(prompts[r["id"]], r["reply"])
    header["rescored"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    summaries = summarize(runs)
    write_rows(path, [header] + runs + summaries)
    print_table(summaries, runs)


def main():
    args = parse_args()
    if args.table:
        rows = read_rows(args.table)
        print_table([r for r in rows if r["row"] == "summary"], [r for r in rows if r["row"] == "run"])
        return
    if args.rescore:
        rescore(args.rescore, args.prompts)
        return
    cactus = find_cactus(args.cactus)
    prompts = load_prompts(args.prompts)
    model_seeds = dict((kv.split("=", 1)[0], int(kv.split("=", 1)[1])) for kv in args.model_seeds)
    runs = []
    for model in args.models:
        n_seeds = model_seeds.get(model, args.seeds)
        plan = [("default", None)] + [("sampled", seed) for seed in range(1, n_seeds + 1)]
        for setting, seed in plan:
            for prompt in prompts:
                r = run_once(cactus, model, prompt, setting, seed, args)
                runs.append(r)
                print("%-20s %-8s %-4s %-24s %s %r" % (model, setting, seed or "", prompt["id"],
                                                       "pass" if r["pass"] else "FAIL", r["reply"][:60]),
                      file=sys.stderr, flush=True)
    summaries = summarize(runs)
    out = args.out or os.path.join(REPO, "bench", "results", "first_run_%s.jsonl" % cpu_tag())
    header = {"row": "header", "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "commit": git_commit(), "machine": machine_summary(), "n_predict": args.n_predict,
              "threads": args.threads, "settings": SETTINGS, "prompts": os.path.relpath(args.prompts, REPO)}
    write_rows(out, [header] + runs + summaries)
    print_table(summaries, runs)


if __name__ == "__main__":
    main()
