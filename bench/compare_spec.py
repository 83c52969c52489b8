#!/usr/bin/env python3
"""Speculative decoding speed of cactus against plain decoding and against llama.cpp's, on real prompts.

For the target model (qwen2.5-coder-1.5b) with a draft model (qwen2.5-coder-0.5b), at each thread
count, every prompt of bench/data/spec_prompts.jsonl (code edits, summaries, free-form chat) is
decoded greedily by five engines:

    ours_plain     cactus run --spec off
    ours_adaptive  cactus run --draft DRAFT            (the adaptive choice: draft model or n-gram)
    ours_ngram     cactus run --spec ngram             (prompt lookup, no second model)
    llama_spec     llama-speculative-simple -md DRAFT --spec-type draft-simple
    llama_plain    llama-completion                    (the same prompt, no drafting)

with the same files, rendered prompt, k (draft max), threads, context size and n_predict. The
engines run ALTERNATELY, ours then a peer, and the order flips every round (ABBA), so the slow drift
of a shared machine hits all of them alike. Each invocation reports its own decode speed (tokens
after the first / time after the first token for ours, llama.cpp's "decoded N tokens in S seconds"
for llama-speculative-simple, its "eval time" for llama-completion); load and prefill are excluded.

Writes build/bench-results/speculative_<cpu-tag>.json (one row per run and a summary per thread
count and prompt kind), appends one row per thread count, prompt and engine of ours (medians over
the rounds, against llama.cpp's counterpart) to bench/results/history.jsonl, and prints a markdown
table. --check-greedy instead checks exactness: for every prompt of spec_prompts.jsonl and
spec_check_prompts.jsonl (50), ours with speculative decoding (draft and n-gram) must print exactly
the text plain decoding prints.

    PY=~/.cache/cactus/oracle/venv/bin/python
    $PY bench/compare_spec.py                                   # full run: 300 runs, ~2 h on 2 cores
    $PY bench/compare_spec.py --per-kind 6 -n 128               # 18 prompts: ~45 min on 2 cores
    $PY bench/compare_spec.py --threads 2 --per-kind 1 -n 16    # smoke test
    $PY bench/compare_spec.py --check-greedy -n 48              # exactness on 50 prompts
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
import history  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
DATA_DIR = os.path.join(REPO, "bench", "data")

# ---- how each engine is driven: the spellings live here, so a CLI change is a one-line edit ----

# cactus run (tools/cli/cli_run.cpp): one completion; the reply on stdout, metrics on stderr.
CACTUS_RUN = "run"
CACTUS_PROMPT = "-p"
CACTUS_RAW = "--raw"  # the prompt is already rendered with the chat template (the same text llama.cpp gets)
CACTUS_N_PREDICT = "-n"
CACTUS_TEMP = "--temp"
CACTUS_THREADS = "-t"
CACTUS_CTX = "-c"
CACTUS_MLOCK = "--mlock"  # weights in RAM, as llama.cpp's --load-mode none
CACTUS_SPEC = "--spec"  # off | ngram | draft
CACTUS_DRAFT = "--draft"  # the draft model; without --spec the adaptive choice (draft or n-gram)
CACTUS_DRAFT_MAX = "--draft-max"

# The metrics line `cactus run` prints on stderr (cli_common.cpp print_metrics), with the
# speculative part when drafting is on:
#   [ttft 210.5 ms | prefill 37 tok @ 175.8 tok/s | decode 32 tok @ 17.3 tok/s | total 2000.0 ms
#    | drafts accepted 25/56 (44.6%) | 5.33 tok/step]
CACTUS_DECODE_RE = re.compile(r"decode (\d+) tok @ ([0-9.]+) tok/s")
CACTUS_DRAFTS_RE = re.compile(r"drafts accepted (\d+)/(\d+)")
CACTUS_TOKENS_PER_STEP_RE = re.compile(r"([0-9.]+) tok/step")

# llama.cpp (vendor/llama.cpp of the llama-cpp-python sdist, built by bench/build_llama_tool.sh).
LLAMA_SPEC_TOOL = "llama-speculative-simple"
LLAMA_PLAIN_TOOL = "llama-completion"
LLAMA_DRAFT_TYPE = "draft-simple"  # --spec-type: the draft model, as our --spec draft
LLAMA_NGRAM_TYPE = "ngram-simple"  # --spec-type for the optional llama_ngram engine
LLAMA_LOAD = ["--load-mode", "none"]  # read the weights into buffers (no mmap), as compare_llama.py
LLAMA_SPEC_DECODED_RE = re.compile(r"decoded\s+(\d+) tokens in\s+([0-9.]+) seconds, speed:\s+([0-9.]+) t/s")
LLAMA_SPEC_COUNTER_RES = {"n_drafted": re.compile(r"n_drafted\s*=\s*(\d+)"),
                          "n_accept": re.compile(r"n_accept\s*=\s*(\d+)")}
LLAMA_EVAL_RE = re.compile(r"common_perf_print:\s+eval time =\s+([0-9.]+) ms /\s+(\d+) runs.*?([0-9.]+|inf) tokens per second")

ENGINES = ["ours_plain", "llama_plain", "ours_adaptive", "llama_spec", "ours_ngram"]
OPTIONAL_ENGINES = ["llama_ngram"]
SPEC_ENGINES = {"ours_adaptive": "ours_plain", "ours_ngram": "ours_plain", "llama_spec": "llama_plain",
                "llama_ngram": "llama_plain"}  # each speculative engine and its plain baseline
KINDS = ["edit", "summary", "chat"]
WARNED = {}
GROUPS = {"edit": ["edit"], "summary": ["summary"], "chat": ["chat"], "edit+summary": ["edit", "summary"],
          "all": KINDS}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default=os.path.join(MODELS_DIR, "qwen2.5-coder-1.5b.gguf"))
    p.add_argument("--draft", default=os.path.join(MODELS_DIR, "qwen2.5-coder-0.5b.gguf"))
    p.add_argument("--prompts", nargs="+", default=None,
                   help="prompt files (JSONL: id, kind, messages); default spec_prompts.jsonl "
                        "(and spec_check_prompts.jsonl with --check-greedy)")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated prompt kinds to run")
    p.add_argument("--per-kind", type=int, default=0, help="at most this many prompts of each kind (0 = all)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=1, help="rounds over the prompts per thread count (>= 1)")
    p.add_argument("-n", "--n-predict", type=int, default=None,
                   help="tokens to generate (default 192; 48 with --check-greedy)")
    p.add_argument("--draft-max", type=int, default=16, help="k: most tokens drafted per step (both engines)")
    p.add_argument("--ctx", type=int, default=4096, help="context size (both engines)")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="comma-separated engines, in alternation order (%s; also %s)"
                        % (", ".join(ENGINES), ", ".join(OPTIONAL_ENGINES)))
    p.add_argument("--check-greedy", action="store_true",
                   help="check that ours with speculative decoding prints exactly the plain text")
    p.add_argument("--check-specs", default="draft,ngram",
                   help="--check-greedy: the --spec values compared with off (draft uses --draft)")
    p.add_argument("--llama-args", default="",
                   help="extra flags for both llama.cpp tools, e.g. '--spec-draft-p-min 0.75' (default: theirs)")
    p.add_argument("--cactus", default=None, help="cactus binary (default $CACTUS_BUILD_DIR/bin/cactus)")
    p.add_argument("--llama-bin", default=None, help="folder of llama.cpp's tools (default: build/cached)")
    p.add_argument("--cpu-tag", default=None, help="results file tag (default: from lscpu, e.g. xeon-2core)")
    p.add_argument("--out", default=None, help="results JSON (default build/bench-results/speculative_<cpu-tag>.json)")
    p.add_argument("--history", default=history.HISTORY, help="rows are appended here (default %(default)s)")
    p.add_argument("--no-history", action="store_true", help="do not append rows to the history file")
    p.add_argument("--keep-text", action="store_true", help="keep every reply's text in the results rows")
    p.add_argument("--timeout", type=int, default=1800, help="seconds allowed per invocation")
    args = p.parse_args()
    validate_args(p, args)
    return args


def validate_args(p, args):
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        p.error("--threads must be comma-separated integers, got %r" % args.threads)
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    args.check_specs = [s.strip() for s in args.check_specs.split(",") if s.strip()]
    if args.n_predict is None:
        args.n_predict = 48 if args.check_greedy else 192
    if not args.threads or min(args.threads) < 1:
        p.error("--threads must be a list of positive integers")
    if args.reps < 1 or args.n_predict < 1 or args.draft_max < 1 or args.per_kind < 0:
        p.error("--reps, -n and --draft-max must be >= 1 and --per-kind >= 0")
    bad = [k for k in args.kinds if k not in KINDS]
    if bad:
        p.error("--kinds: unknown kind %s (%s)" % (", ".join(bad), ", ".join(KINDS)))
    bad = [e for e in args.engines if e not in ENGINES + OPTIONAL_ENGINES]
    if bad:
        p.error("--engines: unknown engine %s (%s)" % (", ".join(bad), ", ".join(ENGINES + OPTIONAL_ENGINES)))
    bad = [s for s in args.check_specs if s not in ("draft", "ngram")]
    if bad:
        p.error("--check-specs: unknown value %s (draft, ngram)" % ", ".join(bad))
    if args.prompts is None:
        names = ["spec_prompts.jsonl"] + (["spec_check_prompts.jsonl"] if args.check_greedy else [])
        args.prompts = [os.path.join(DATA_DIR, n) for n in names]
    for path in [args.target, args.draft] + args.prompts:
        if not os.path.isfile(path):
            p.error("file not found: %s" % path)


# ---- prompts ------------------------------------------------------------------------------------

def load_prompts(paths, kinds, per_kind):
    prompts, seen = [], set()
    for path in paths:
        with open(path) as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if row.get("kind") not in KINDS or not row.get("messages") or row.get("id") in seen:
                    raise ValueError("%s:%d: needs a unique id, a kind in %s and messages" % (path, number, KINDS))
                seen.add(row["id"])
                prompts.append(row)
    chosen = []
    for kind in kinds:
        of_kind = [r for r in prompts if r["kind"] == kind]
        chosen += of_kind[:per_kind] if per_kind else of_kind
    return chosen


def chat_template(model_path):
    """The model's own Jinja chat template, from its GGUF metadata."""
    import gguf  # the oracle venv's gguf package
    reader = gguf.GGUFReader(model_path)
    field = reader.fields.get("tokenizer.chat_template")
    if field is None:
        raise ValueError("%s has no tokenizer.chat_template" % model_path)
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def render_prompts(prompts, template_text):
    """Renders every prompt once, so both engines tokenize exactly the same text."""
    import jinja2

    def raise_exception(message):
        raise jinja2.TemplateError(message)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(template_text)
    for row in prompts:
        row["text"] = template.render(messages=row["messages"], add_generation_prompt=True, tools=None)


# ---- engines ------------------------------------------------------------------------------------

def run_capture(cmd, timeout):
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout)
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd[:3]), proc.returncode, err[-3000:]))
    return out, err


def cactus_cmd(args, threads, text, spec=None, draft=False):
    cmd = [args.cactus_bin, CACTUS_RUN, args.target, CACTUS_PROMPT, text, CACTUS_RAW, CACTUS_N_PREDICT,
           str(args.n_predict), CACTUS_TEMP, "0", CACTUS_THREADS, str(threads), CACTUS_CTX, str(args.ctx), CACTUS_MLOCK]
    if spec:
        cmd += [CACTUS_SPEC, spec]
    if draft:
        cmd += [CACTUS_DRAFT, args.draft]
    if spec != "off":
        cmd += [CACTUS_DRAFT_MAX, str(args.draft_max)]
    return cmd


def parse_cactus(out, err):
    match = CACTUS_DECODE_RE.search(err)
    if not match:
        raise RuntimeError("cactus printed no metrics line (%s):\n%s" % (CACTUS_DECODE_RE.pattern, err[-2000:]))
    tail = err[match.start():]
    row = {"decode_tokens": int(match.group(1)), "decode_tps": float(match.group(2)), "draft_tokens": None,
           "draft_accepted": None, "tokens_per_step": None}
    drafts = CACTUS_DRAFTS_RE.search(tail)
    if drafts:
        row["draft_accepted"], row["draft_tokens"] = int(drafts.group(1)), int(drafts.group(2))
    per_step = CACTUS_TOKENS_PER_STEP_RE.search(tail)
    if per_step:
        row["tokens_per_step"] = float(per_step.group(1))
    row["text"] = out[:-1] if out.endswith("\n") else out  # cli_run adds one newline after the reply
    return row


def run_ours(args, threads, text, spec=None, draft=False):
    out, err = run_capture(cactus_cmd(args, threads, text, spec, draft), args.timeout)
    row = parse_cactus(out, err)
    if spec != "off" and row["draft_tokens"] is None and not WARNED.get("counters"):
        WARNED["counters"] = True
        print("compare_spec: warning: no draft counters in cactus's metrics (adjust CACTUS_DRAFTS_RE):\n%s"
              % err[-400:], file=sys.stderr)
    if row["draft_tokens"]:
        row["acceptance"] = row["draft_accepted"] / row["draft_tokens"]
    return row


def llama_common(args, threads, text):
    return ["-m", args.target, "-p", text, "-n", str(args.n_predict), "--temp", "0", "--top-k", "1", "-t",
            str(threads), "-c", str(args.ctx)] + LLAMA_LOAD + args.llama_args.split()


def run_llama_spec(args, threads, text, spec_type):
    cmd = [args.llama_spec] + llama_common(args, threads, text) + [
        "--spec-type", spec_type, "--spec-draft-n-max", str(args.draft_max)]
    if spec_type == LLAMA_DRAFT_TYPE:
        cmd += ["-md", args.draft, "-td", str(threads)]
    out, err = run_capture(cmd, args.timeout)
    match = LLAMA_SPEC_DECODED_RE.search(err)
    if not match:
        raise RuntimeError("%s printed no 'decoded' line:\n%s" % (LLAMA_SPEC_TOOL, err[-2000:]))
    row = {"decode_tokens": int(match.group(1)), "decode_tps": float(match.group(3))}
    for key, pattern in LLAMA_SPEC_COUNTER_RES.items():
        found = pattern.search(err)
        row[key] = int(found.group(1)) if found else None
    if row["n_drafted"]:
        row["acceptance"] = row["n_accept"] / row["n_drafted"]
    if row["n_accept"] is not None and row["decode_tokens"] > row["n_accept"]:
        # every target step yields its accepted drafts plus one token of its own
        row["tokens_per_step"] = row["decode_tokens"] / (row["decode_tokens"] - row["n_accept"])
    # stdout: two newlines, the prompt, the reply, then blank lines (so trailing newlines are dropped)
    body = out[2:] if out.startswith("\n\n") else out
    row["text"] = (body[len(text):] if body.startswith(text) else body).rstrip("\n")
    return row


def run_llama_plain(args, threads, text):
    cmd = [args.llama_plain] + llama_common(args, threads, text) + ["-no-cnv", "--no-display-prompt"]
    out, err = run_capture(cmd, args.timeout)
    match = LLAMA_EVAL_RE.search(err)
    if not match:
        raise RuntimeError("%s printed no 'eval time' line:\n%s" % (LLAMA_PLAIN_TOOL, err[-2000:]))
    eval_ms, runs = float(match.group(1)), int(match.group(2))
    return {"decode_tokens": runs, "decode_tps": runs * 1e3 / eval_ms if eval_ms > 0 else 0.0,
            "text": out.rstrip("\n")}


def run_engine(engine, args, threads, text):
    if engine == "ours_plain":
        return run_ours(args, threads, text, spec="off")
    if engine == "ours_adaptive":
        return run_ours(args, threads, text, draft=True)
    if engine == "ours_ngram":
        return run_ours(args, threads, text, spec="ngram")
    if engine == "llama_spec":
        return run_llama_spec(args, threads, text, LLAMA_DRAFT_TYPE)
    if engine == "llama_ngram":
        return run_llama_spec(args, threads, text, LLAMA_NGRAM_TYPE)
    return run_llama_plain(args, threads, text)


def find_llama_tool(tool, folder):
    if folder:
        return os.path.join(folder, tool)
    script = os.path.join(REPO, "bench", "build_llama_tool.sh")
    out = subprocess.run(["bash", script, tool], stdout=subprocess.PIPE, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


# ---- the speed comparison -------------------------------------------------------------------------

def measure(args, prompts):
    """One row per (threads, round, prompt, engine); engine order flips every round (ABBA)."""
    rows = []
    for threads in args.threads:
        for rep in range(args.reps):
            for index, prompt in enumerate(prompts):
                flip = (rep + index) % 2 == 1
                for engine in (reversed(args.engines) if flip else args.engines):
                    result = run_engine(engine, args, threads, prompt["text"])
                    row = {"threads": threads, "rep": rep, "id": prompt["id"], "kind": prompt["kind"],
                           "engine": engine}
                    row.update(result)
                    rows.append(row)
                    print("  t=%d %-18s %-13s %6.2f tok/s%s" % (
                        threads, prompt["id"][:18], engine, row["decode_tps"],
                        "  acc %.2f" % row["acceptance"] if row.get("acceptance") is not None else ""), flush=True)
    return rows


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if a is not None and b else None


def per_prompt_medians(rows, threads, engine, ids, key="decode_tps"):
    """{prompt id: median of key over the rounds}."""
    out = {}
    for pid in ids:
        out[pid] = median([r.get(key) for r in rows
                           if r["threads"] == threads and r["engine"] == engine and r["id"] == pid])
    return out


def summarize_group(rows, threads, ids, engines):
    """Medians over the group's prompts (each prompt's own median over rounds first), and the
    speedups as the median of per-prompt ratios (a prompt's spec run against its own plain run)."""
    tps = {e: per_prompt_medians(rows, threads, e, ids) for e in engines}
    summary = {"prompts": len(ids), "tps": {e: median(list(tps[e].values())) for e in engines}}
    summary["acceptance"] = {e: median(list(per_prompt_medians(rows, threads, e, ids, "acceptance").values()))
                             for e in engines if e in SPEC_ENGINES}
    summary["tokens_per_step"] = {
        e: median(list(per_prompt_medians(rows, threads, e, ids, "tokens_per_step").values()))
        for e in engines if e in SPEC_ENGINES}
    ratios = {}
    for spec, plain in SPEC_ENGINES.items():
        if spec in engines and plain in engines:
            ratios["%s/%s" % (spec, plain)] = median([ratio(tps[spec][i], tps[plain][i]) for i in ids])
    if "ours_adaptive" in engines and "llama_spec" in engines:
        ratios["ours_adaptive/llama_spec"] = median([ratio(tps["ours_adaptive"][i], tps["llama_spec"][i]) for i in ids])
        # the better of ours (as a user would pick per workload) against llama.cpp's draft
        best = {i: max(v for v in (tps["ours_adaptive"][i], tps.get("ours_ngram", {}).get(i)) if v is not None)
                for i in ids if tps["ours_adaptive"][i] is not None}
        ratios["ours_best/llama_spec"] = median([ratio(best.get(i), tps["llama_spec"][i]) for i in ids])
    summary["ratios"] = ratios
    return summary


def summarize(rows, prompts, args):
    out = []
    for threads in args.threads:
        for group, kinds in GROUPS.items():
            ids = [p["id"] for p in prompts if p["kind"] in kinds]
            if not ids or (group == "all" and len(args.kinds) < 2):
                continue
            entry = {"threads": threads, "group": group}
            entry.update(summarize_group(rows, threads, ids, args.engines))
            out.append(entry)
    return out


# The speed claims, as (group, ratio, bound): checked per thread count in the summary.
CLAIMS = [("edit+summary", "ours_adaptive/ours_plain", 1.5), ("edit+summary", "ours_adaptive/llama_spec", 1.25),
          ("chat", "ours_adaptive/ours_plain", 0.95)]


def check_claims(summary):
    out = []
    for entry in summary:
        for group, key, bound in CLAIMS:
            value = entry["ratios"].get(key)
            if entry["group"] == group and value is not None:
                out.append({"threads": entry["threads"], "group": group, "ratio": key, "value": value,
                            "bound": bound, "met": value >= bound})
    return out


def same_prefix(a, b):
    """Whether one text starts with the other: llama-speculative-simple stops up to k tokens past
    n_predict, llama-completion at n_predict."""
    return a.startswith(b) or b.startswith(a)


def same_text_checks(rows, args):
    """Greedy runs of one engine family should print the same text with and without drafting."""
    checks = {}
    for spec, plain in SPEC_ENGINES.items():
        if spec not in args.engines or plain not in args.engines:
            continue
        pairs = [(r, p) for r in rows if r["engine"] == spec for p in rows
                 if p["engine"] == plain and p["id"] == r["id"] and p["threads"] == r["threads"] and p["rep"] == r["rep"]]
        checks[spec] = {"same": sum(same_prefix(r["text"], p["text"]) for r, p in pairs), "of": len(pairs)}
    return checks


def fmt(value, pattern="%.2f"):
    return pattern % value if value is not None else "-"


def markdown_table(summary, engines):
    ratio_keys = sorted({k for s in summary for k in s["ratios"]})
    spec_engines = [e for e in engines if e in SPEC_ENGINES]
    # tokens per step stay in the JSON: the table keeps to speeds, ratios and acceptance
    head = ["threads", "prompts"] + ["%s tok/s" % e for e in engines] + ratio_keys + ["%s acc" % e for e in spec_engines]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summary:
        cells = ["%d" % s["threads"], "%s (%d)" % (s["group"], s["prompts"])]
        cells += [fmt(s["tps"].get(e)) for e in engines]
        cells += [fmt(s["ratios"].get(k)) + ("×" if s["ratios"].get(k) is not None else "") for k in ratio_keys]
        cells += [fmt(s["acceptance"].get(e)) for e in spec_engines]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---- the exactness check --------------------------------------------------------------------------

def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else -1


def check_greedy(args, prompts):
    threads = args.threads[-1]
    rows, failures = [], 0
    for prompt in prompts:
        plain = run_ours(args, threads, prompt["text"], spec="off")
        for spec in args.check_specs:
            got = run_ours(args, threads, prompt["text"], spec=spec, draft=(spec == "draft"))
            at = first_difference(plain["text"], got["text"])
            rows.append({"id": prompt["id"], "kind": prompt["kind"], "spec": spec, "same": at < 0,
                         "first_difference": at, "plain_tokens": plain["decode_tokens"],
                         "acceptance": got.get("acceptance"), "tokens_per_step": got.get("tokens_per_step")})
            failures += at >= 0
            print("  %-22s %-6s %s" % (prompt["id"][:22], spec, "same" if at < 0 else
                                       "DIFFERS at char %d: %r vs %r" % (at, plain["text"][at:at + 40],
                                                                         got["text"][at:at + 40])), flush=True)
    print("check-greedy: %d of %d runs identical to plain decoding (%d prompts, -n %d, %d thread(s))"
          % (len(rows) - failures, len(rows), len(prompts), args.n_predict, threads))
    return rows, failures


# ---- main -----------------------------------------------------------------------------------------

def cpu_tag():
    """e.g. xeon-2core: the CPU family from lscpu's model name and the cores this process may use."""
    try:
        lscpu = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        name = next((l.split(":", 1)[1] for l in lscpu.splitlines() if l.startswith("Model name:")), "")
    except OSError:
        name = ""
    words = re.findall(r"[a-z0-9]+", name.lower())
    family = next((w for w in words if w in ("xeon", "epyc", "ryzen", "core", "neoverse", "graviton", "ampere")),
                  words[0] if words else "cpu")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return "%s-%dcore" % (family, cores)


def write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
    print("compare_spec: wrote %s" % os.path.relpath(path, REPO))


def main():
    args = parse_args()
    if args.check_greedy or any(e.startswith("ours") for e in args.engines):
        args.cactus_bin = find_cactus(args.cactus)
    commit = git_commit()  # at the start: the tree may be committed to while this runs
    prompts = load_prompts(args.prompts, args.kinds, args.per_kind)
    render_prompts(prompts, chat_template(args.target))
    tag = args.cpu_tag or cpu_tag()
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cactus_commit": commit,
            "target": os.path.basename(args.target), "draft": os.path.basename(args.draft),
            "n_predict": args.n_predict, "draft_max": args.draft_max, "ctx": args.ctx, "llama_args": args.llama_args,
            "machine": machine_summary()}
    if args.check_greedy:
        rows, failures = check_greedy(args, prompts)
        meta.update({"threads": args.threads[-1], "rows": rows, "identical": len(rows) - failures, "runs": len(rows)})
        write_json(args.out or os.path.join(REPO, "build", "bench-results", "speculative_check_%s.json" % tag), meta)
        return 1 if failures else 0
    if any(e.startswith("llama") for e in args.engines):
        args.llama_spec = find_llama_tool(LLAMA_SPEC_TOOL, args.llama_bin)
        args.llama_plain = find_llama_tool(LLAMA_PLAIN_TOOL, args.llama_bin)
    print("compare_spec: %d prompts, threads %s, -n %d, k %d, engines %s" % (
        len(prompts), args.threads, args.n_predict, args.draft_max, ", ".join(args.engines)), flush=True)
    rows = measure(args, prompts)
    summary = summarize(rows, prompts, args)
    table = markdown_table(summary, args.engines)
    claims = check_claims(summary)
    print("\n" + table)
    for c in claims:
        print("%s  t=%d %s %s = %.2f (>= %.2f)" % ("met   " if c["met"] else "NOT MET", c["threads"], c["group"],
                                                  c["ratio"], c["value"], c["bound"]))
    same_text = same_text_checks(rows, args)
    if not args.keep_text:
        for row in rows:
            row.pop("text")  # the replies are long; same_text keeps what they tell
    meta.update({"threads": args.threads, "reps": args.reps, "engines": args.engines,
                 "llama_cpp": "llama-cpp-python 0.3.36 sdist: %s, %s" % (LLAMA_SPEC_TOOL, LLAMA_PLAIN_TOOL),
                 "same_text": same_text, "claims": claims, "summary": summary, "table": table, "rows": rows})
    write_json(args.out or os.path.join(REPO, "build", "bench-results", "speculative_%s.json" % tag), meta)
    if not args.no_history:
        history.append_rows(history_rows(rows, prompts, args, commit), args.history)
    return 0


def history_rows(rows, prompts, args, commit):
    """One history row per thread count, prompt and engine of ours: its median decode tok/s over the
    rounds against llama.cpp's counterpart (llama_spec for a speculative engine, llama_plain for plain)."""
    out, date, cpu, tier = [], history.now(), history.local_cpu(), history.local_tier()
    ids = [p["id"] for p in prompts]
    for threads in args.threads:
        for engine in [e for e in args.engines if e.startswith("ours")]:
            peer = "llama_plain" if engine == "ours_plain" else "llama_spec"
            ours = per_prompt_medians(rows, threads, engine, ids)
            theirs = per_prompt_medians(rows, threads, peer, ids) if peer in args.engines else {}
            accept = per_prompt_medians(rows, threads, engine, ids, "acceptance")
            for pid in ids:
                out.append(history.make_row(
                    date=date, commit=commit, cpu=cpu, tier=tier, device="cpu",
                    file="%s + %s draft" % (os.path.basename(args.target), os.path.basename(args.draft)),
                    threads=threads, test="decode %s %s" % (engine[len("ours_"):], pid), ours=ours[pid],
                    peer=theirs.get(pid), peer_name="llama.cpp " + (LLAMA_PLAIN_TOOL if peer == "llama_plain"
                                                                    else LLAMA_SPEC_TOOL),
                    unit="tok/s", source="bench/compare_spec.py",
                    extra={"acceptance": accept[pid], "draft_max": args.draft_max, "n_predict": args.n_predict}))
    return out


if __name__ == "__main__":
    sys.exit(main())
