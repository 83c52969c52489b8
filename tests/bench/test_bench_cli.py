"""Smoke tests of `cactus bench` (a few seconds): the JSON has every field, rates are positive and
consistent with the sizes asked for, bad input fails cleanly. Run:
    CACTUS_BUILD_DIR=build ~/.cache/cactus/oracle/venv/bin/python -m pytest -q tests/bench/test_bench_cli.py
"""
import json
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "cactus")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
SMOLLM = os.path.join(MODELS, "smollm2-135m.gguf")


def bench(*args):
    return subprocess.run([BIN, "bench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300)


def test_model_json_has_every_figure():
    assert os.path.isfile(SMOLLM), "missing model %s" % SMOLLM
    proc = bench(SMOLLM, "-p", "16", "-n", "4", "-r", "2", "-t", "1,2", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["architecture"] == "llama"
    assert doc["residency"] in ("locked", "anonymous")  # the default keeps weights in RAM
    assert 0 < doc["weight_bytes_per_token"] <= doc["file_bytes"]
    assert sum(doc["weight_types"].values()) <= doc["file_bytes"]
    assert doc["peak_rss_bytes"] >= doc["weight_bytes_per_token"] // 2
    assert [r["threads"] for r in doc["results"]] == [1, 2]
    for r in doc["results"]:
        pp, tg = r["prefill"]["tokens_per_second"], r["decode"]["tokens_per_second"]
        assert r["prefill"]["test"] == "pp16" and r["decode"]["test"] == "tg4"
        for s in (pp, tg, r["ttft_ms"]):
            assert len(s["samples"]) == 2
            assert 0 < s["min"] <= s["median"] <= s["max"]
        # TTFT is the time of the 16-token prefill call: sample by sample, not through the medians
        # (with two samples the median is their mean, and the mean of rates is not the rate of the
        # mean time, so a noisy machine once parted them by 30%).
        rates = sorted(1e3 * 16 / t for t in r["ttft_ms"]["samples"])
        assert rates == pytest.approx(sorted(pp["samples"]), rel=1e-3)


def test_no_mlock_keeps_the_mapping_and_skipping_a_test_reports_zero():
    proc = bench(SMOLLM, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--json", "--no-mlock")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["residency"] == "mapped"
    assert doc["results"][0]["decode"]["tokens_per_second"]["median"] == 0
    assert doc["results"][0]["prefill"]["tokens_per_second"]["median"] > 0


def test_table_output():
    proc = bench(SMOLLM, "-p", "8", "-n", "2", "-r", "1", "-t", "1")
    assert proc.returncode == 0, proc.stderr
    assert "pp8" in proc.stdout and "tg2" in proc.stdout and "peak RSS" in proc.stdout


def test_membw():
    proc = bench("--membw", "--membw-mib", "64", "-t", "1", "-r", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)["results"][0]
    assert r["threads"] == 1
    assert 0.1 < r["read_gb_per_s"]["max"] < 10000 and 0.1 < r["copy_gb_per_s"]["max"] < 10000


def test_bad_input_fails_with_a_message():
    for args, needle in ((["/nonexistent/x.gguf"], "does not exist"),
                         ([SMOLLM, "-p", "0", "-n", "0"], "nothing to measure"),
                         ([SMOLLM, "-t", "300"], "outside")):
        proc = bench(*args)
        assert proc.returncode != 0
        assert needle in proc.stderr, proc.stderr
