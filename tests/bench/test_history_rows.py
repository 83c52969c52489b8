"""The compare scripts turn their measurements into history rows (bench/history.py's fields), one per
thread count and test, with cactus's value against the peer's."""
import os
import sys
import types

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import compare_embedding  # noqa: E402
import compare_server  # noqa: E402
import compare_spec  # noqa: E402
import device_rows  # noqa: E402
import history  # noqa: E402


def check_fields(rows):
    for row in rows:
        assert tuple(row) == history.FIELDS
        assert row["date"] and row["cpu"] and row["tier"] and row["source"].startswith("bench/")


def test_spec_rows_pair_each_engine_with_its_llama_counterpart():
    args = types.SimpleNamespace(threads=[2], engines=["ours_plain", "ours_ngram", "llama_plain", "llama_spec"],
                                 target="/m/t.gguf", draft="/m/d.gguf", draft_max=16, n_predict=128)
    runs = [dict(threads=2, engine=e, id="p1", decode_tps=v, acceptance=0.5)
            for e, v in (("ours_plain", 10), ("ours_ngram", 12), ("llama_plain", 6), ("llama_spec", 5))]
    rows = compare_spec.history_rows(runs, [{"id": "p1"}], args, "abc1234")
    check_fields(rows)
    got = {r["test"]: (r["ours"], r["peer"]) for r in rows}
    assert got == {"decode plain p1": (10, 6), "decode ngram p1": (12, 5)}


def test_server_rows_take_medians_per_client_count():
    args = types.SimpleNamespace(model="/m/s.gguf", threads=2, slots=4, peer="llama-server", device="cpu")
    runs = [dict(server=s, clients=c, aggregate_tps=v) for s, c, v in
            (("cactus", 1, 10), ("llama-server", 1, 5), ("cactus", 1, 12), ("llama-server", 1, 7), ("cactus", 4, 20))]
    rows = compare_server.history_rows(runs, args)
    check_fields(rows)
    assert [(r["test"], r["ours"], r["peer"]) for r in rows] == [("serve c1 aggregate", 11, 6),
                                                               ("serve c4 aggregate", 20, None)]


def test_embedding_rows_name_the_tier_asked_for():
    args = types.SimpleNamespace(model="/m/e.gguf", isa="avx2")
    runs = [dict(engine=e, threads=1, texts=64, texts_per_s=v) for e, v in (("cactus", 100), ("llama.cpp", 50))]
    rows = compare_embedding.history_rows(runs, args)
    check_fields(rows)
    assert (rows[0]["tier"], rows[0]["ours"], rows[0]["peer"], rows[0]["unit"]) == ("avx2", 100, 50, "texts/s")


def test_device_rows_average_our_two_runs_beside_llama_bench():
    log = """NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 1980 MHz
## 10:53:36 smollm2-135m
ours: device: cuda:0 (NVIDIA H100 80GB HBM3, step graphs on)
ours:       8 | pp512   |   53500.00 |   53464.95 |   53894.28 |   230.23 |        9.6
ours:       8 | tg128   |     664.69 |     660.99 |     668.25 |     3.63 |          -
llama: | llama ?B Q4_1    | 138.43 MiB |   134.52 M | CUDA       |  99 |           pp512 |     50089.13 \u00b1 1234.55 |
llama: | llama ?B Q4_1    | 138.43 MiB |   134.52 M | CUDA       |  99 |           tg128 |       950.12 \u00b1 3.21 |
ours again:       8 | pp512   |   52500.00 |   53464.95 |   53894.28 |   230.23 |        9.6
## 10:54:13 whisper-tiny.en (random weights, 30 s synthetic signal)
"""
    rows = device_rows.rows(log, "2026-12-07T11:00:00", "abc1234")
    check_fields(rows)
    got = {(r["file"], r["test"]): (r["ours"], r["peer"], r["tier"], r["device"]) for r in rows}
    assert got == {("smollm2-135m.gguf", "pp512"): (53000.0, 50089.1, "NVIDIA H100 80GB HBM3", "cuda"),
                   ("smollm2-135m.gguf", "tg128"): (664.7, 950.1, "NVIDIA H100 80GB HBM3", "cuda")}
