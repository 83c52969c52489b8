"""docs/PERFORMANCE.md stays a reference page: its tables are what bench/perf_report.py renders from
bench/results/history.jsonl, and the page stays short enough to read."""
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import history  # noqa: E402
import perf_report  # noqa: E402

DOC = os.path.join(REPO, "docs", "PERFORMANCE.md")
MAX_LINES = 400


def read_doc():
    with open(DOC) as f:
        return f.read()


def test_committed_tables_match_the_generator():
    text = read_doc()
    assert perf_report.apply(text, perf_report.render(history.load_rows())) == text, \
        "docs/PERFORMANCE.md's tables differ from history.jsonl: run python3 bench/perf_report.py"


def test_every_generated_section_is_present():
    names = {m.group(2) for m in perf_report.MARKER.finditer(read_doc())}
    assert names == set(perf_report.render(history.load_rows()))


def test_doc_is_at_most_400_lines():
    n = len(read_doc().splitlines())
    assert n <= MAX_LINES, "docs/PERFORMANCE.md has %d lines (at most %d)" % (n, MAX_LINES)


def test_every_history_row_has_the_fields():
    rows = history.load_rows()
    assert rows
    for row in rows:
        assert tuple(row) == history.FIELDS, row
        assert row["date"] and row["cpu"] and row["test"] and row["unit"] and row["source"], row
        assert row["device"] in ("cpu", "cuda"), row
        assert isinstance(row["ours"], (int, float)), row


def test_a_changed_row_changes_the_table():
    rows = history.load_rows()
    newest = max((r for r in rows if r["source"] == "bench/compare_llama.py"), key=lambda r: r["date"])
    changed = dict(newest, ours=newest["ours"] * 3 + 1)
    before = perf_report.render(rows)["cpu-table"]
    after = perf_report.render(rows + [changed])["cpu-table"]
    assert before != after


def test_llama_compare_rows_round_trip(tmp_path):
    doc = {"date": "2026-12-06T10:00:00", "isa": "avx2", "cactus_kernels": ["avx2"], "cactus_commit": "abc1234",
           "llama_cpp_build": {"build_commit": "0c1e570"},
           "machine": {"Model name": "AMD EPYC", "Vendor ID": "AuthenticAMD", "CPU family": "26", "Model": "2",
                       "CPU(s)": "2"},
           "rows": [{"model": "m.gguf", "threads": 1, "quant": "Q4_0", "n_prompt": 512, "n_gen": 128,
                     "cactus_kernels": "avx2", "ours": {"pp_tps": 100.0, "tg_tps": 20.0},
                     "llama_cpp": {"pp_tps": 50.0, "tg_tps": 10.0},
                     "bandwidth": {"ours_fraction": 0.9, "llama_cpp_fraction": 0.45}}]}
    rows = history.rows_from_llama_compare(doc)
    path = tmp_path / "history.jsonl"
    assert history.append_rows(rows, str(path)) == 2
    back = history.load_rows(str(path))
    assert [(r["test"], r["ours"], r["peer"]) for r in back] == [("pp512", 100.0, 50.0), ("tg128", 20.0, 10.0)]
    assert back[0]["cpu"] == "AMD EPYC (family 26 model 2, Zen 5), 2 vCPU"
    assert back[0]["tier"] == "avx2" and back[0]["peer_name"] == "llama.cpp 0c1e570 AVX2 build"
    table = perf_report.cpu_tables(back)
    assert "100 / 50.0 = **2.00x**" in table and "90% (45%)" in table
    json.dumps(back)


def test_unknown_generated_section_is_an_error():
    try:
        perf_report.apply("<!-- generated:nope -->\nx\n<!-- end -->", {})
    except KeyError as e:
        assert "nope" in str(e)
    else:
        raise AssertionError("an unknown section must not pass silently")
