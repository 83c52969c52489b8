#!/usr/bin/env python3
"""Side-by-side speed of cactus and llama.cpp's llama-bench on the same GGUF files.

For every model and thread count, runs `cactus bench` and `llama-bench` ALTERNATELY (ABBA order:
ours-theirs, theirs-ours, ...), one timed repetition per invocation (each tool does its own warm-up
first), so slow drift of a shared machine hits both engines alike. Both keep the weights in RAM
(ours: mlock or an anonymous copy, the `cactus bench` default; llama.cpp: `--load-mode none`, i.e.
read into buffers, the `--mmap 0` of older versions). Also measures memory bandwidth
(`cactus bench --membw`) to express decode speed as a fraction of the bandwidth bound
(weight bytes read per token / read bandwidth): once at the start, and again before every
repetition at the row's thread count, so each row's bound is read in the same minutes as its decode
(a shared host's bandwidth drifts by a third within a run).

Appends one row per model, thread count and test to bench/results/history.jsonl (bench/history.py
names the fields; bench/perf_report.py renders docs/PERFORMANCE.md's tables from them), and writes
OUT/compare.json (every sample, the machine, both builds), OUT/compare.md (the tables) and
OUT/compare.png (a bar plot, when matplotlib is importable). Usage:

    ~/.cache/cactus/oracle/venv/bin/python bench/compare_llama.py            # full run
    ~/.cache/cactus/oracle/venv/bin/python bench/compare_llama.py --reps 1 -p 32 -n 8 --threads 1
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
DEFAULT_MODELS = [os.path.join(MODELS_DIR, "smollm2-135m.gguf"), os.path.join(MODELS_DIR, "gemma3-270m.gguf")]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help="GGUF files")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per engine (>= 1)")
    p.add_argument("-p", "--n-prompt", type=int, default=512, help="prefill test tokens (ppN)")
    p.add_argument("-n", "--n-gen", type=int, default=128, help="decode test tokens (tgN)")
    p.add_argument("--cactus", default=None, help="cactus binary (default $CACTUS_BUILD_DIR/bin/cactus)")
    p.add_argument("--llama-bench", default=None, help="llama-bench binary (default: build/cached)")
    p.add_argument("--cactus-baseline", default=None,
                   help="a second cactus binary (an earlier build) run in the same alternation: rows add its "
                        "speeds and cactus / baseline ratios (a before/after comparison on one machine, one run)")
    p.add_argument("--isa", choices=["native", "avx2"], default="native",
                   help="kernel tier of both engines: native (everything this CPU has) or avx2 (cactus with "
                        "CACTUS_CPU_ISA=avx2, llama-bench built with AVX/AVX2/FMA/F16C only)")
    p.add_argument("--out", default=None,
                   help="folder of compare.json/.md/.png (default build/bench-results, build/bench-results/avx2 "
                        "for --isa avx2)")
    p.add_argument("--history", default=history.HISTORY, help="rows are appended here (default %(default)s)")
    p.add_argument("--no-history", action="store_true", help="do not append rows to the history file")
    p.add_argument("--membw-mib", type=int, default=256, help="buffer size of the bandwidth test")
    p.add_argument("--timeout", type=int, default=1800, help="seconds allowed per invocation")
    args = p.parse_args()
    args.threads = [int(t) for t in args.threads.split(",") if t.strip()]
    if args.out is None:
        args.out = os.path.join(REPO, "build", "bench-results", *(["avx2"] if args.isa == "avx2" else []))
    if args.reps < 1 or not args.threads or min(args.threads) < 1:
        p.error("--reps must be >= 1 and --threads a list of positive integers")
    if args.n_prompt < 1 or args.n_gen < 1:
        p.error("-p and -n must be >= 1")
    for m in args.models:
        if not os.path.isfile(m):
            p.error("model file not found: %s (scripts/setup.sh fetches the default models)" % m)
    return args


def run_json(cmd, timeout, env=None):
    """Runs a command and parses its stdout as JSON; raises with stderr on failure."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd), proc.returncode, proc.stderr[-4000:]))
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise RuntimeError("%s printed no JSON (%s):\n%s" % (" ".join(cmd), e, proc.stdout[-2000:]))


def find_cactus(explicit):
    path = explicit or os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "cactus")
    if not os.access(path, os.X_OK):
        sys.exit("compare_llama: no cactus binary at %s (build it, or set CACTUS_BUILD_DIR / --cactus)" % path)
    return path


def find_llama_bench(explicit, isa):
    if explicit:
        return explicit
    script = os.path.join(REPO, "bench", "build_llama_tool.sh")
    env = dict(os.environ, LLAMA_BENCH_ISA=isa)
    out = subprocess.run(["bash", script, "llama-bench"], stdout=subprocess.PIPE, text=True, check=True,
                         env=env).stdout
    return out.strip().splitlines()[-1]


def machine_summary():
    """The lscpu fields that matter for the report, plus kernel and memory."""
    info = {"platform": platform.platform()}
    try:
        lscpu = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        for line in lscpu.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "Vendor ID", "CPU family", "Model", "CPU(s)", "Thread(s) per core",
                               "Core(s) per socket", "L1d cache",
                               "L2 cache", "L3 cache", "Hypervisor vendor", "CPU max MHz"):
                info[key.strip()] = value.strip()
        flags = next((l for l in lscpu.splitlines() if l.startswith("Flags:")), "")
        info["simd"] = " ".join(f for f in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8",
                                            "avx512_bf16") if (" %s " % f) in flags + " ")
        with open("/proc/meminfo") as f:
            info["MemTotal"] = f.readline().split(":")[1].strip()
    except OSError:
        pass
    return info


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                              text=True).stdout.strip()
    except OSError:
        return ""


def ours_once(cactus, model, threads, args):
    env = dict(os.environ, CACTUS_CPU_ISA="avx2") if args.isa == "avx2" else None
    doc = run_json([cactus, "bench", model, "-p", str(args.n_prompt), "-n", str(args.n_gen), "-r", "1", "-t",
                    str(threads), "--json"], args.timeout, env)
    r = doc["results"][0]
    return {"pp": r["prefill"]["tokens_per_second"]["median"], "tg": r["decode"]["tokens_per_second"]["median"],
            "ttft_ms": r["ttft_ms"]["median"], "peak_rss_bytes": doc["peak_rss_bytes"],
            "rss_loaded_bytes": r.get("rss_loaded_bytes", 0)}, doc


def theirs_once(llama_bench, model, threads, args):
    tests = run_json([llama_bench, "-m", model, "-p", str(args.n_prompt), "-n", str(args.n_gen), "-r", "1", "-t",
                      str(threads), "-o", "json", "--load-mode", "none", "-ngl", "0"], args.timeout)
    out = {}
    for t in tests:
        if t["n_prompt"] > 0 and t["n_gen"] == 0:
            out["pp"] = t["avg_ts"]
            out["ttft_ms"] = 1e3 * t["n_prompt"] / t["avg_ts"] if t["avg_ts"] > 0 else 0.0
        elif t["n_gen"] > 0 and t["n_prompt"] == 0:
            out["tg"] = t["avg_ts"]
    if "pp" not in out or "tg" not in out:
        raise RuntimeError("llama-bench output lacks a pp or tg test: %s" % json.dumps(tests)[:2000])
    return out, tests[0]


def median(values):
    return statistics.median(values) if values else 0.0


def ratio(a, b):
    return a / b if b > 0 else 0.0


def quant_label(weight_types):
    """The tensor type holding most bytes, e.g. "Q4_1"; the mix in brackets when it is a mix."""
    total = sum(weight_types.values()) or 1
    ranked = sorted(weight_types.items(), key=lambda kv: -kv[1])
    main = ranked[0][0]
    if ranked[0][1] / total > 0.9:
        return main
    return main + " (" + ", ".join("%s %d%%" % (k, round(100 * v / total)) for k, v in ranked if v / total >= 0.02) + ")"


def bandwidth(cactus, args, threads=None, reps=5):
    threads = ",".join(str(t) for t in (args.threads if threads is None else [threads]))
    doc = run_json([cactus, "bench", "--membw", "--membw-mib", str(args.membw_mib), "-t", threads, "-r", str(reps),
                    "--json"], args.timeout)
    return {r["threads"]: r for r in doc["results"]}, doc


def compare_one(cactus, llama_bench, model, threads, args):
    """ABBA-alternated runs of both engines (and the baseline build, when given) on one model and
    thread count, each round after a read-bandwidth sample (best of 3) at that thread count."""
    ours, theirs, base, ours_doc, theirs_doc, read_gbs = [], [], [], None, None, []
    engines = ["ours", "theirs"] + (["baseline"] if args.cactus_baseline else [])
    for rep in range(args.reps):
        bw, _ = bandwidth(cactus, args, threads, reps=3)
        read_gbs.append(bw[threads]["read_gb_per_s"]["max"])
        order = engines if rep % 2 == 0 else engines[::-1]
        for engine in order:
            t0 = time.time()
            if engine == "ours":
                sample, ours_doc = ours_once(cactus, model, threads, args)
                ours.append(sample)
            elif engine == "baseline":
                sample, _ = ours_once(args.cactus_baseline, model, threads, args)
                base.append(sample)
            else:
                sample, theirs_doc = theirs_once(llama_bench, model, threads, args)
                theirs.append(sample)
            print("  %-6s rep %d/%d: pp %8.1f tok/s  tg %7.1f tok/s  (%.0f s)" %
                  (engine, rep + 1, args.reps, sample["pp"], sample["tg"], time.time() - t0), flush=True)
    return ours, theirs, base, ours_doc, theirs_doc, read_gbs


def summarize(model, threads, ours, theirs, base, ours_doc, theirs_doc, read_gbs_samples, args):
    llama_type = theirs_doc.get("model_type", "")  # "llama 256M Q4_1", "gemma3 270M Q4_K - Medium"
    quant = llama_type.split(" ", 2)[2] if llama_type.count(" ") >= 2 else quant_label(ours_doc["weight_types"])
    row = {"model": os.path.basename(model), "threads": threads, "quant": quant,
           "tensor_mix": quant_label(ours_doc["weight_types"]), "llama_model_type": llama_type, "n_prompt": args.n_prompt, "n_gen": args.n_gen,
           "reps": args.reps, "weight_bytes_per_token": ours_doc["weight_bytes_per_token"],
           "cactus_kernels": ours_doc.get("kernels", "")}
    for name, samples in (("ours", ours), ("llama_cpp", theirs)):
        row[name] = {"pp_tps": median([s["pp"] for s in samples]), "tg_tps": median([s["tg"] for s in samples]),
                     "ttft_ms": median([s["ttft_ms"] for s in samples]),
                     "pp_samples": [s["pp"] for s in samples], "tg_samples": [s["tg"] for s in samples]}
    row["ours"]["peak_rss_bytes"] = max(s["peak_rss_bytes"] for s in ours)
    row["ours"]["rss_loaded_bytes"] = max(s["rss_loaded_bytes"] for s in ours)
    if base:
        row["baseline"] = {"binary": args.cactus_baseline, "pp_tps": median([s["pp"] for s in base]),
                           "tg_tps": median([s["tg"] for s in base]), "pp_samples": [s["pp"] for s in base],
                           "tg_samples": [s["tg"] for s in base]}
        row["ratio_pp_vs_baseline"] = ratio(row["ours"]["pp_tps"], row["baseline"]["pp_tps"])
        row["ratio_tg_vs_baseline"] = ratio(row["ours"]["tg_tps"], row["baseline"]["tg_tps"])
    row["ratio_pp"] = ratio(row["ours"]["pp_tps"], row["llama_cpp"]["pp_tps"])
    row["ratio_tg"] = ratio(row["ours"]["tg_tps"], row["llama_cpp"]["tg_tps"])
    # The median of the row's samples (each the best of 3), as the decode speeds are medians: on a
    # host whose bandwidth flips between two levels within seconds, the best sample would pair
    # the fast level with decode samples taken at the slow one.
    read_gbs = median(read_gbs_samples)
    bound = ratio(read_gbs * 1e9, row["weight_bytes_per_token"])
    row["bandwidth"] = {"read_gb_per_s": read_gbs, "read_gb_per_s_samples": read_gbs_samples, "decode_bound_tps": bound,
                        "ours_fraction": ratio(row["ours"]["tg_tps"], bound),
                        "llama_cpp_fraction": ratio(row["llama_cpp"]["tg_tps"], bound)}
    return row


def markdown_table(rows):
    lines = ["| model | quant | threads | test | cactus tok/s | llama.cpp tok/s | ratio |",
             "|---|---|---:|---|---:|---:|---:|"]
    for r in rows:
        for test, key, rkey in (("pp%d" % r["n_prompt"], "pp_tps", "ratio_pp"), ("tg%d" % r["n_gen"], "tg_tps", "ratio_tg")):
            lines.append("| %s | %s | %d | %s | %.1f | %.1f | %.2f |" % (
                r["model"], r["quant"], r["threads"], test, r["ours"][key], r["llama_cpp"][key], r[rkey]))
    lines += ["", "| model | threads | weights read / token | read bandwidth | decode bound | cactus tg | "
              "cactus / bound | llama.cpp tg | llama.cpp / bound |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = r["bandwidth"]
        lines.append("| %s | %d | %.1f MiB | %.1f GB/s | %.1f tok/s | %.1f | %.0f%% | %.1f | %.0f%% |" % (
            r["model"], r["threads"], r["weight_bytes_per_token"] / 2**20, b["read_gb_per_s"], b["decode_bound_tps"],
            r["ours"]["tg_tps"], 100 * b["ours_fraction"], r["llama_cpp"]["tg_tps"], 100 * b["llama_cpp_fraction"]))
    if any("baseline" in r for r in rows):
        lines += ["", "| model | threads | test | cactus tok/s | baseline build tok/s | cactus / baseline |",
                  "|---|---:|---|---:|---:|---:|"]
        for r in rows:
            for test, key, rkey in (("pp%d" % r["n_prompt"], "pp_tps", "ratio_pp_vs_baseline"),
                                    ("tg%d" % r["n_gen"], "tg_tps", "ratio_tg_vs_baseline")):
                lines.append("| %s | %d | %s | %.1f | %.1f | %.3f |" % (r["model"], r["threads"], test, r["ours"][key],
                                                                     r["baseline"][key], r[rkey]))
    lines += ["", "| model | threads | cactus TTFT (pp) ms | llama.cpp pp time ms | cactus RSS, model loaded | cactus peak RSS |",
              "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %d | %.0f | %.0f | %.1f MiB | %.1f MiB |" % (
            r["model"], r["threads"], r["ours"]["ttft_ms"], r["llama_cpp"]["ttft_ms"],
            r["ours"]["rss_loaded_bytes"] / 2**20, r["ours"]["peak_rss_bytes"] / 2**20))
    return "\n".join(lines) + "\n"


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare_llama: matplotlib missing, no plot (pip install matplotlib into the oracle venv)")
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = ["%s\n%d thr" % (r["model"].replace(".gguf", ""), r["threads"]) for r in rows]
    xs = range(len(rows))
    for ax, key, title in ((axes[0], "pp_tps", "prefill pp%d" % rows[0]["n_prompt"]),
                           (axes[1], "tg_tps", "decode tg%d" % rows[0]["n_gen"])):
        ax.bar([x - 0.2 for x in xs], [r["ours"][key] for r in rows], 0.4, label="cactus")
        ax.bar([x + 0.2 for x in xs], [r["llama_cpp"][key] for r in rows], 0.4, label="llama.cpp")
        if key == "tg_tps":
            ax.scatter(list(xs), [r["bandwidth"]["decode_bound_tps"] for r in rows], marker="_", s=600,
                       color="black", label="bandwidth bound", zorder=3)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("tokens / s (median)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    args = parse_args()
    cactus = find_cactus(args.cactus)
    commit = git_commit()  # at the start: the tree may be committed to while this runs
    llama_bench = find_llama_bench(args.llama_bench, args.isa)
    os.makedirs(args.out, exist_ok=True)
    print("compare_llama: cactus %s, llama-bench %s" % (cactus, llama_bench), flush=True)
    _, bw_doc = bandwidth(cactus, args)  # the machine at the start; each row measures its own
    rows = []
    for model in args.models:
        for threads in args.threads:
            print("%s, %d thread(s):" % (os.path.basename(model), threads), flush=True)
            ours, theirs, base, ours_doc, theirs_doc, read_gbs = compare_one(cactus, llama_bench, model, threads, args)
            rows.append(summarize(model, threads, ours, theirs, base, ours_doc, theirs_doc, read_gbs, args))
    table = markdown_table(rows)
    print("\n" + table)
    doc = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "isa": args.isa,
           "cactus_kernels": sorted({r["cactus_kernels"] for r in rows}), "cactus_commit": commit, "cactus_binary": cactus,
           "llama_cpp_build": {k: theirs_doc.get(k) for k in ("build_commit", "build_number", "cpu_info")},
           "machine": machine_summary(), "membw": bw_doc, "rows": rows}
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(doc, f, indent=2)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(table)
    plotted = plot(rows, os.path.join(args.out, "compare.png"))
    print("compare_llama: wrote %s/compare.json, compare.md%s" % (args.out, ", compare.png" if plotted else ""))
    if not args.no_history:
        n = history.append_rows(history.rows_from_llama_compare(doc), args.history)
        print("compare_llama: appended %d rows to %s (python3 bench/perf_report.py renders them)" % (n, args.history))


if __name__ == "__main__":
    main()
