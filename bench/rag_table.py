#!/usr/bin/env python3
"""Renders the recorded RAG rows (bench/results/rag/*.jsonl) as the tables of docs/RAG.md.

    python3 bench/rag_table.py            # print the tables
    python3 bench/rag_table.py --write    # replace the generated block in docs/RAG.md
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results", "rag")
DOC = os.path.join(ROOT, "docs", "RAG.md")
BEGIN, END = "<!-- rag_table.py begin -->", "<!-- rag_table.py end -->"


def rows(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path) if line.strip()]


def eval_table():
    out = []
    runs = {}
    for r in rows("rag_eval.jsonl"):
        runs.setdefault((r["embedder"], r["chunks"], r.get("corpus", "")), []).append(r)
    for (embedder, chunks, corpus), rs in runs.items():
        out.append(f"**{embedder}**; {corpus}: {rs[0]['files']} pages, {chunks} chunks, {rs[0]['queries']} queries "
                   f"(embedding {rs[0]['embed_s']:.0f} s)\n")
        out.append("| ranking | recall@1 | recall@5 | recall@10 | MRR@10 | nDCG@10 |")
        out.append("|---|---|---|---|---|---|")
        for r in rs:
            out.append(f"| {r['ranking']} | {r['recall@1']:.4f} | {r['recall@5']:.4f} | {r['recall@10']:.4f} | "
                       f"{r['mrr@10']:.4f} | {r['ndcg@10']:.4f} |")
        out.append("")
    return out


def bench_table():
    out = ["| chunks | dim | scan threads (0 auto) | build s (no embedding) | cached reopen s | vector ms | bm25 ms | "
           "hybrid ms | chunks.bin MB | load (1 min) / hw threads |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows("rag_bench.jsonl"):
        out.append(f"| {r['chunks']} | {r['dim']} | {r['search_threads']} | {r['build_s_excl_embed']:.2f} | {r['reopen_cached_s']:.2f} | "
                   f"{r['query_ms_vector']:.2f} | {r['query_ms_bm25']:.2f} | {r['query_ms_hybrid']:.2f} | "
                   f"{r['chunks_bin_bytes'] / 1e6:.0f} | {r.get('loadavg_1min', '?')} / {r.get('hw_threads', '?')} |")
    return out


def main():
    text = "\n".join(["### Retrieval quality (tests/tools/rag_eval, bench/results/rag/rag_eval.jsonl)", ""] +
                     eval_table() +
                     ["### Cost (tests/tools/rag_bench, bench/results/rag/rag_bench.jsonl)", ""] + bench_table())
    if "--write" not in sys.argv:
        print(text)
        return
    doc = open(DOC).read()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    open(DOC, "w").write(doc[:start] + "\n" + text + "\n" + doc[end:])


if __name__ == "__main__":
    main()
