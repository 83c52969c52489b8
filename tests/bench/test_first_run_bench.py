"""bench/first_run.py without running a model: its checks pass right replies and fail wrong ones,
its metrics pattern reads `cactus run`'s stderr line, and the committed result file was scored with
the prompts file as it is now (a corrected regex needs `--rescore`)."""
import json
import os
import re
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import first_run  # noqa: E402

PROMPTS = {p["id"]: p for p in first_run.load_prompts(first_run.PROMPTS)}
RESULTS = os.path.join(REPO, "bench", "results", "first_run_xeon-2core.jsonl")


def test_every_prompt_has_a_kind_and_a_valid_check():
    assert 20 <= len(PROMPTS) <= 40
    for p in PROMPTS.values():
        assert p["kind"] in ("fact", "instruct"), p
        re.compile(p["expect"])


@pytest.mark.parametrize("prompt_id, reply, ok", [
    ("capital_france", "The capital of France is Paris.", True),
    ("capital_france", "La femme de France, le Grand Croix, est le grand paysage de la femme de France.", False),
    ("one_word_sky", "Blue.", True),
    ("one_word_sky", "The sky on a clear day is a beautiful shade of blue.", False),
    ("uppercase_hello", "HELLO", True),
    ("uppercase_hello", "Hello in capital letters only.", False),
    ("sort_numbers", "2, 4, 7, 9.", True),
    ("sort_numbers", "Here's the sorted list:\n\n1. 2\n2. 4\n3. 7\n4. 9", True),
    ("sort_numbers", "The numbers are 2, 4, 7, 9, 10, 11, 12", False),
    ("json_capital", '```json\n{\n  "capital": "Berlin"\n}\n```', True),
    ("json_capital", '{"key": "capital", "value": "Berlin"}', False),
    ("translate_spanish", "Buen día.", True),
    ("translate_spanish", "Buenas noches.", False),
    ("prime_17", "Yes.", True),
    ("prime_17", "No. 17 is not a prime number.", False),
])
def test_checks(prompt_id, reply, ok):
    assert first_run.passes(PROMPTS[prompt_id], reply) == ok


def test_metrics_pattern_reads_the_cli_line():
    line = "\n[ttft 215.7 ms | prefill 26 tok @ 120.6 tok/s | decode 7 tok @ 18.6 tok/s | total 537.8 ms]\n"
    m = first_run.METRICS_RE.search(line)
    assert m and m.groups() == ("215.7", "26", "7", "18.6")


def test_committed_results_match_the_prompts_file():
    with open(RESULTS) as f:
        rows = [json.loads(line) for line in f]
    runs = [r for r in rows if r["row"] == "run"]
    assert {r["id"] for r in runs} == set(PROMPTS)
    for r in runs:
        assert r["pass"] == first_run.passes(PROMPTS[r["id"]], r["reply"]), r
    assert [r for r in rows if r["row"] == "summary"] == first_run.summarize(runs)
