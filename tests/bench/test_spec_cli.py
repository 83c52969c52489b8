"""Speculative decoding on the command line: `cactus run --spec/--draft` prints the draft counters
beside its usual metrics and the reply of plain decoding; `cactus bench --spec/--draft` adds
acceptance rate and tokens per model step to its usual figures, in the table and the JSON; bad
flags are usage errors (exit status 2) naming the flag. Run:
    CACTUS_BUILD_DIR=build ~/.cache/cactus/oracle/venv/bin/python -m pytest -q tests/bench/test_spec_cli.py
"""
import json
import os
import re
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "cactus")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
QWEN = os.path.join(MODELS, "qwen2.5-coder-0.5b.gguf")
EDIT = ("Rename `n` to `count` and return only the code:\n"
        "```python\ndef repeat(text, n):\n    out = []\n    for _ in range(n):\n        out.append(text)\n"
        "    return out\n```")


def cactus(*args):
    return subprocess.run([BIN, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def plain_run():
    assert os.path.isfile(QWEN), "missing model %s" % QWEN
    proc = cactus("run", QWEN, "-p", EDIT, "-n", "40", "-t", "2")
    assert proc.returncode == 0, proc.stderr
    assert "drafts accepted" not in proc.stderr
    return proc


@pytest.mark.parametrize("flags", [["--spec", "ngram"], ["--draft", "qwen2.5-coder-0.5b", "--draft-max", "6"]])
def test_run_prints_the_draft_counters_and_the_plain_reply(plain_run, flags):
    proc = cactus("run", QWEN, "-p", EDIT, "-n", "40", "-t", "2", *flags)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == plain_run.stdout
    m = re.search(r"decode (\d+) tok .*drafts accepted (\d+)/(\d+) \(([\d.]+)%\) \| ([\d.]+) tok/step", proc.stderr)
    assert m, proc.stderr
    decoded, accepted, drafted, _, per_step = int(m[1]), int(m[2]), int(m[3]), float(m[4]), float(m[5])
    assert 0 < accepted <= drafted, proc.stderr
    assert 1.0 < per_step <= decoded, proc.stderr


def test_bench_json_has_the_usual_figures_and_the_speculative_ones():
    proc = cactus("bench", QWEN, "-p", "8", "-n", "24", "-r", "1", "-t", "2", "--spec", "ngram", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    r = doc["results"][0]
    assert r["prefill"]["test"] == "pp8" and r["decode"]["test"] == "tg24"
    assert r["decode"]["tokens_per_second"]["median"] > 0
    spec = doc["speculative"]
    assert spec["spec_type"] == "ngram" and spec["draft_model"] == "" and spec["draft_max"] == 16
    assert spec["max_tokens"] == 24 and spec["reps"] == 1
    row = spec["results"][0]
    assert row["threads"] == 2 and row["same_output"] is True
    assert row["plain_decode_tps"]["median"] > 0 and row["spec_decode_tps"]["median"] > 0
    assert row["speedup"] == pytest.approx(row["spec_decode_tps"]["median"] / row["plain_decode_tps"]["median"])
    # Whether prompt lookup is verified here depends on the step costs it measures
    # (SpecDecoder::verifying_pays): on a loaded machine 24 tokens of a random prompt may all be
    # scored in the shadow. The run test above (an edit that copies its input) checks that it drafts.
    assert 0 <= row["draft_accepted"] <= row["draft_tokens"]
    if row["draft_tokens"] > 0:
        assert row["acceptance_rate"] == pytest.approx(row["draft_accepted"] / row["draft_tokens"])
    assert row["tokens_per_step"] == pytest.approx(row["decode_tokens"] / row["decode_steps"])
    assert row["tokens_per_step"] >= 1


def test_bench_table_with_a_draft_model():
    proc = cactus("bench", QWEN, "-p", "0", "-n", "16", "-r", "1", "-t", "2", "--draft", "qwen2.5-coder-0.5b",
                  "--draft-max", "4")
    assert proc.returncode == 0, proc.stderr
    assert "tg16" in proc.stdout and "peak RSS" in proc.stdout
    assert "speculative decoding: draft with " in proc.stdout and "draft_max 4" in proc.stdout
    assert "accept %" in proc.stdout and "tok/step" in proc.stdout
    row = proc.stdout.strip().splitlines()[-1].split("|")
    assert row[0].strip() == "2" and row[-1].strip() == "yes", proc.stdout


@pytest.mark.parametrize("command", ["run", "chat", "bench"])
def test_an_unknown_spec_is_a_usage_error(command):
    args = [command, QWEN, "--spec", "bogus"] + (["-p", "hi"] if command == "run" else [])
    proc = cactus(*args)
    assert proc.returncode == 2, proc.stderr
    assert "--spec" in proc.stderr and "bogus" in proc.stderr and "draft, ngram or off" in proc.stderr


def test_inconsistent_spec_flags_are_usage_errors():
    proc = cactus("run", QWEN, "-p", "hi", "--spec", "draft")
    assert proc.returncode == 2 and "--draft MODEL" in proc.stderr, proc.stderr
    proc = cactus("run", QWEN, "-p", "hi", "--spec", "ngram", "--draft", "qwen2.5-coder-0.5b")
    assert proc.returncode == 2 and "--draft" in proc.stderr, proc.stderr
    proc = cactus("bench", QWEN, "--spec", "ngram", "--membw")
    assert proc.returncode == 2 and "--membw" in proc.stderr, proc.stderr
    proc = cactus("run", QWEN, "-p", "hi", "--draft-max", "0")
    assert proc.returncode != 0 and "--draft-max" in proc.stderr, proc.stderr


def test_a_draft_model_of_another_vocabulary_is_an_error():
    proc = cactus("run", QWEN, "-p", "hi", "-n", "2", "--draft", "smollm2-135m")
    assert proc.returncode == 1 and "smollm2-135m" in proc.stderr and "vocabulary" in proc.stderr, proc.stderr
