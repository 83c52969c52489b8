#!/usr/bin/env python3
"""Renders the tables of docs/PERFORMANCE.md from bench/results/history.jsonl.

Each table sits between `<!-- generated:NAME -->` and `<!-- end -->` in the doc; this script replaces
what lies between them, so no number in those tables is typed by hand. tests/bench/test_perf_report.py
fails when the committed tables differ from this script's output.

    python3 bench/perf_report.py            # rewrite the tables in docs/PERFORMANCE.md
    python3 bench/perf_report.py --check    # exit 1 when they are out of date
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402

DOC = os.path.join(history.REPO, "docs", "PERFORMANCE.md")
MARKER = re.compile(r"(<!-- generated:([a-z0-9-]+) -->\n)(.*?)(<!-- end -->)", re.S)
# Files in reading order: the real downloads first, then llama.cpp's requantizations of them.
FILE_ORDER = ("smollm2-135m.gguf", "gemma3-270m.gguf", "qwen2.5-coder-1.5b.gguf", "gemma4-e2b-q4_0.gguf")


def rate(value):
    if value is None:
        return "-"
    return "%.0f" % value if value >= 100 else "%.1f" % value


def cell(row):
    """'ours / peer = ratio' with the ratio in bold at 1.25x or more (the project's target)."""
    if row is None:
        return "-"
    text = "%s / %s" % (rate(row["ours"]), rate(row["peer"]))
    if row["ours"] and row["peer"]:
        ratio = row["ours"] / row["peer"]
        text += (" = **%.2fx**" if ratio >= 1.25 else " = %.2fx") % ratio
    return text + ("" if row["test"] in ("pp512", "tg128") else " (%s)" % row["test"])


def bound(row):
    extra = (row or {}).get("extra", {})
    ours, peer = extra.get("ours_bound_fraction"), extra.get("peer_bound_fraction")
    if ours is None:
        return "-"
    return "%.0f%% (%s)" % (100 * ours, "-" if peer is None else "%.0f%%" % (100 * peer))


def valid(row):
    return "not a valid" not in (row.get("extra") or {}).get("note", "")


def latest(rows, key):
    """The newest row per key(row); rows later in the file win ties."""
    out = {}
    for row in rows:
        k = key(row)
        if k not in out or (row["date"] or "") >= (out[k]["date"] or ""):
            out[k] = row
    return out


def file_rank(name):
    return (FILE_ORDER.index(name), "") if name in FILE_ORDER else (len(FILE_ORDER), name)


def cpu_tables(rows):
    """One table per (CPU, tier): the newest ours-vs-llama.cpp row per file, threads and test."""
    llama = [r for r in rows if r["source"] == "bench/compare_llama.py" and r["device"] == "cpu" and valid(r)]
    newest = latest(llama, lambda r: (r["cpu"], r["tier"], r["file"], r["threads"], r["test"]))
    groups = {}
    for r in newest.values():
        groups.setdefault((r["cpu"], r["tier"]), []).append(r)
    order = sorted(groups, key=lambda g: max(r["date"] for r in groups[g]), reverse=True)
    out = []
    for cpu, tier in order:
        g = groups[(cpu, tier)]
        dates = sorted({r["date"][:10] for r in g})
        peers = sorted({r["peer_name"] for r in g})
        cells = {}
        for r in g:
            key = (r["file"], r["threads"], "pp" if r["test"].startswith("pp") else "tg")
            if key not in cells or r["date"] > cells[key]["date"]:
                cells[key] = r
        threads = sorted({k[1] for k in cells})
        files = sorted({k[0] for k in cells}, key=file_rank)
        out += ["#### %s, %s tier, against %s (%s%s)" % (
            cpu, tier, ", ".join(peers), dates[0], "" if len(dates) == 1 else " to " + dates[-1]),
            "| file | quant | %s | %s | decode / bound (llama.cpp), %s | date, commit |" % (
                " | ".join("prefill %d t" % t for t in threads), " | ".join("decode %d t" % t for t in threads),
                ", ".join("%d t" % t for t in threads)),
            "|---|---|%s---|---|" % ("---|" * (2 * len(threads)))]
        for f in files:
            mine = [cells.get((f, t, kind)) for kind in ("pp", "tg") for t in threads]
            newest = max((r for r in mine if r), key=lambda r: r["date"])
            out.append("| %s | %s | %s | %s | %s, %s |" % (
                f, newest["quant"], " | ".join(cell(r) for r in mine),
                ", ".join(bound(cells.get((f, t, "tg"))) for t in threads), newest["date"][:10],
                newest["commit"] or "-"))
    return "\n".join(out) + "\n"


def gpu_table(rows):
    """The newest device rows (device cuda) beside the same machine's host CPU rows of that run."""
    gpu = [r for r in rows if r["device"] == "cuda" and r["test"] in ("pp512", "tg128")]  # not serve, media
    runs = {(r["source"], r["date"]) for r in gpu}
    mine = [r for r in rows if (r["source"], r["date"]) in runs]
    newest = latest(mine, lambda r: (r["device"], r["tier"], r["file"], r["test"]))
    lines = ["| file | device | threads | pp512 tok/s | tg128 tok/s | date |", "|---|---|---:|---:|---:|---|"]
    keys = sorted({(r["file"], r["device"], r["tier"], r["cpu"], r["threads"]) for r in newest.values()},
                  key=lambda k: (file_rank(k[0]), k[1] != "cuda", k[2], k[3]))
    for f, device, tier, cpu, threads in keys:
        def pick(test):
            r = newest.get((device, tier, f, test))
            return r if r else None
        pp, tg = pick("pp512"), pick("tg128")
        label = "cuda:0 (%s)" % tier if device == "cuda" else "host CPU (%s, %s tier)" % (cpu, tier)
        date = max(r["date"] for r in (pp, tg) if r)[:10]
        lines.append("| %s | %s | %d | %s | %s | %s |" % (f, label, threads, rate(pp and pp["ours"]),
                                                         rate(tg and tg["ours"]), date))
    return "\n".join(lines) + "\n"


def render(rows):
    return {"cpu-table": cpu_tables(rows), "gpu-table": gpu_table(rows)}


def apply(text, sections):
    """The doc with every generated section replaced; raises on a marker this script does not know."""
    def replace(m):
        name = m.group(2)
        if name not in sections:
            raise KeyError("docs/PERFORMANCE.md: no generator for section %r" % name)
        return m.group(1) + sections[name] + m.group(4)
    return MARKER.sub(replace, text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when the doc's tables are out of date")
    p.add_argument("--doc", default=DOC)
    p.add_argument("--history", default=history.HISTORY)
    args = p.parse_args()
    with open(args.doc) as f:
        text = f.read()
    new = apply(text, render(history.load_rows(args.history)))
    if args.check:
        if new != text:
            print("perf_report: %s is out of date; run python3 bench/perf_report.py" % args.doc)
            return 1
        return 0
    if new != text:
        with open(args.doc, "w") as f:
            f.write(new)
        print("perf_report: rewrote the tables of %s" % args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
