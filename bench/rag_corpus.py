#!/usr/bin/env python3
"""Builds the man-page retrieval benchmark (docs/RAG.md; research/EMBEDDINGS_RAG.md §4.3).

One .txt per unique page of the installed Debian man2/man3/man5/man7 (Linux man-pages; aliases
made with `.so` are skipped), roff stripped to text, the NAME section removed. queries.jsonl
holds one known-item query per page: its NAME one-liner (the text after "\\-") as the query and
the page's file as the answer.

    python3 bench/rag_corpus.py OUT_DIR [--max-chars N]  ->  OUT_DIR/corpus/*.txt, OUT_DIR/queries.jsonl

--max-chars keeps each page's first N characters (cut at a paragraph end): the whole corpus is
~22,000 chunks, which a real embedder on two CPU cores takes long to embed; the first part of a
page (SYNOPSIS, the start of DESCRIPTION) still identifies it.
"""
import gzip
import json
import os
import re
import sys

SECTIONS = ["man2", "man3", "man5", "man7"]
MAN_ROOT = "/usr/share/man"

# Named characters that appear in man-pages' text.
NAMED = {"em": "--", "en": "-", "aq": "'", "dq": '"', "lq": '"', "rq": '"', "oq": "'", "cq": "'",
         "bu": "*", "co": "(C)", "rg": "(R)", "mu": "x", "<=": "<=", ">=": ">=", "ti": "~", "ha": "^",
         "bv": "|", "lh": "<=", "rh": "=>", "->": "->", "<-": "<-", "pl": "+", "mi": "-", "eq": "="}
FONT_MACROS = {"B", "I", "R", "BR", "RB", "BI", "IB", "IR", "RI", "SM", "SB"}
BREAK_MACROS = {"PP", "LP", "P", "TP", "IP", "HP", "TQ", "sp", "SS", "SH", "EX", "EE", "nf", "fi", "RS", "RE"}


def unescape(text):
    text = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", text)          # font changes
    text = re.sub(r"\\\((..)", lambda m: NAMED.get(m.group(1), ""), text)
    text = re.sub(r"\\\[([^\]]*)\]", lambda m: NAMED.get(m.group(1), ""), text)
    text = re.sub(r"\\[*n]\(..|\\[*n].", "", text)              # strings and registers
    text = re.sub(r"\\s[-+]?\d", "", text)                       # size changes
    text = text.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "").replace("\\~", " ")
    text = text.replace("\\ ", " ").replace("\\|", "").replace("\\^", "").replace("\\:", "").replace("\\c", "")
    text = re.sub(r"\\.", "", text)                               # anything else
    return text


def split_args(rest):
    """A macro's arguments: words, or double-quoted strings."""
    return [a[1:-1] if a.startswith('"') else a for a in re.findall(r'"[^"]*"?|\S+', rest)]


def roff_to_text(source):
    """Returns (name_line, text without the NAME section)."""
    lines, name_lines, section = [], [], None
    source = source.replace("\\\n", "")  # roff line continuations
    for raw in source.split("\n"):
        if raw.startswith(('.\\"', "'\\\"", '.\\"')) or raw.startswith("\\\""):
            continue
        raw = re.sub(r'\\".*$', "", raw)
        if raw.startswith((".", "'")):
            m = re.match(r"[.']\s*(\S+)\s*(.*)", raw)
            if not m:
                continue
            macro, rest = m.group(1), m.group(2)
            if macro in ("SH", "SS"):
                title = unescape(" ".join(split_args(rest))).strip()
                if macro == "SH":
                    section = title.upper()
                if section != "NAME":
                    lines += ["", title]
                continue
            if macro in FONT_MACROS:
                args = split_args(rest)
                # Two-letter macros alternate fonts between words written together (.BR open (2)).
                out = unescape(("" if len(macro) == 2 and macro not in ("SM", "SB") else " ").join(args))
            elif macro in BREAK_MACROS:
                if section != "NAME":
                    lines.append("")
                if macro in ("TP", "IP", "HP") and rest and macro == "IP":
                    args = split_args(rest)
                    if args:
                        lines.append(unescape(args[0]))
                continue
            else:
                continue  # other requests (.TH, .in, .ad, .UR, ...) carry no text
        else:
            out = unescape(raw)
        if section == "NAME":
            name_lines.append(out)
        else:
            lines.append(out)
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return " ".join(name_lines).strip(), text


def main():
    args = sys.argv[1:]
    max_chars = 0
    if "--max-chars" in args:
        at = args.index("--max-chars")
        max_chars = int(args[at + 1])
        del args[at:at + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    corpus = os.path.join(out, "corpus")
    os.makedirs(corpus, exist_ok=True)
    queries, skipped = [], 0
    for section in SECTIONS:
        folder = os.path.join(MAN_ROOT, section)
        for entry in sorted(os.listdir(folder)):
            path = os.path.join(folder, entry)
            if os.path.islink(path) or not entry.endswith(".gz"):
                skipped += 1
                continue
            source = gzip.open(path, "rt", errors="replace").read()
            if source.lstrip().startswith(".so "):
                skipped += 1  # an alias of another page
                continue
            name_line, text = roff_to_text(source)
            if " - " not in name_line or len(text) < 40:
                skipped += 1
                continue
            query = name_line.split(" - ", 1)[1].strip()
            if max_chars and len(text) > max_chars:
                cut = text.rfind("\n\n", 0, max_chars)
                text = text[:cut if cut > 0 else max_chars].rstrip() + "\n"
            fname = entry[:-3] + ".txt"
            with open(os.path.join(corpus, fname), "w") as f:
                f.write(text)
            queries.append({"query": query, "answer": fname})
    with open(os.path.join(out, "queries.jsonl"), "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    print(json.dumps({"pages": len(queries), "skipped": skipped, "max_chars": max_chars, "out": out}))


if __name__ == "__main__":
    main()
