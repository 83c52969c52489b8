"""Tests of bench/compare_spec.py: the prompt set is what the issue asks for, the output of each engine
is parsed (on lines copied from real runs), the summary's ratios are per prompt, and (once `cactus run`
has --spec) a tiny greedy exactness check runs end to end. Run:
    CACTUS_BUILD_DIR=build ~/.cache/cactus/oracle/venv/bin/python -m pytest -q tests/bench/test_compare_spec.py
"""
import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import compare_spec  # noqa: E402

BIN = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "cactus")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
QWEN_05B = os.path.join(MODELS, "qwen2.5-coder-0.5b.gguf")
DATA = os.path.join(REPO, "bench", "data")


def read_jsonl(name):
    with open(os.path.join(DATA, name)) as f:
        return [json.loads(line) for line in f if line.strip()]


def code_block_lines(text):
    block = re.search(r"```[a-z]*\n(.*?)```", text, re.S)
    return block.group(1).count("\n") if block else 0


def quoted_words(text):
    passage = re.search(r'"""\n(.*?)\n"""', text, re.S)
    return len(passage.group(1).split()) if passage else 0


def test_prompt_set_has_the_kinds_and_sizes_the_issue_asks_for():
    rows = read_jsonl("spec_prompts.jsonl")
    kinds = [r["kind"] for r in rows]
    assert kinds.count("edit") >= 12 and kinds.count("summary") >= 8 and kinds.count("chat") >= 10
    for r in rows:
        assert set(r) == {"id", "kind", "messages"} and r["messages"][0]["role"] == "user"
        text = r["messages"][0]["content"]
        if r["kind"] == "edit":
            assert 20 <= code_block_lines(text) <= 60, r["id"]
        if r["kind"] == "summary":
            assert 150 <= quoted_words(text) <= 300, r["id"]
    languages = {re.search(r"```([a-z]+)", r["messages"][0]["content"]).group(1) for r in rows if r["kind"] == "edit"}
    assert languages == {"python", "c", "javascript", "go"}


def test_check_set_makes_fifty_prompts_with_unique_ids():
    prompts = compare_spec.load_prompts([os.path.join(DATA, "spec_prompts.jsonl"),
                                         os.path.join(DATA, "spec_check_prompts.jsonl")], compare_spec.KINDS, 0)
    assert len(prompts) == 50 and len({p["id"] for p in prompts}) == 50


def test_per_kind_limit_and_bad_rows(tmp_path):
    prompts = compare_spec.load_prompts([os.path.join(DATA, "spec_prompts.jsonl")], ["summary", "chat"], 2)
    assert [p["kind"] for p in prompts] == ["summary", "summary", "chat", "chat"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "kind": "poem", "messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        compare_spec.load_prompts([str(bad)], compare_spec.KINDS, 0)


@pytest.mark.skipif(not os.path.isfile(QWEN_05B), reason="needs qwen2.5-coder-0.5b.gguf")
def test_prompts_render_with_the_models_chat_template():
    prompts = compare_spec.load_prompts([os.path.join(DATA, "spec_prompts.jsonl")], ["chat"], 1)
    compare_spec.render_prompts(prompts, compare_spec.chat_template(QWEN_05B))
    text = prompts[0]["text"]
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert "<|im_start|>user\n" + prompts[0]["messages"][0]["content"] + "<|im_end|>" in text


def test_cactus_metrics_line_is_parsed():
    err = "\n[ttft 210.5 ms | prefill 37 tok @ 175.8 tok/s | decode 16 tok @ 17.3 tok/s | total 1077.4 ms]\n"
    row = compare_spec.parse_cactus("the reply\n", err)
    assert row["decode_tokens"] == 16 and row["decode_tps"] == 17.3 and row["text"] == "the reply"
    assert row["draft_tokens"] is None and row["tokens_per_step"] is None
    err = err.replace("ms]", "ms | drafts accepted 25/56 (44.6%) | 5.33 tok/step]")
    row = compare_spec.parse_cactus("x\n", err)
    assert (row["draft_accepted"], row["draft_tokens"], row["tokens_per_step"]) == (25, 56, 5.33)
    with pytest.raises(RuntimeError, match="no metrics line"):
        compare_spec.parse_cactus("x\n", "error: something")


def test_llama_lines_are_parsed():
    # lines from llama-speculative-simple and llama-completion of the 0.3.36 sdist
    spec = ("0.31.392.594 I decoded   20 tokens in   20.622 seconds, speed:    0.970 t/s\n"
            "0.31.392.596 I n_drafted = 36\n0.31.392.596 I n_accept  = 15\n")
    m = compare_spec.LLAMA_SPEC_DECODED_RE.search(spec)
    assert (m.group(1), m.group(3)) == ("20", "0.970")
    assert compare_spec.LLAMA_SPEC_COUNTER_RES["n_drafted"].search(spec).group(1) == "36"
    assert compare_spec.LLAMA_SPEC_COUNTER_RES["n_accept"].search(spec).group(1) == "15"
    plain = ("0.08.628.058 I common_perf_print:        eval time =    3327.19 ms /    15 runs   "
             "(  221.81 ms per token,     4.51 tokens per second)\n")
    m = compare_spec.LLAMA_EVAL_RE.search(plain)
    assert (m.group(1), m.group(2)) == ("3327.19", "15")


def test_summary_ratios_are_per_prompt():
    rows = []
    for pid, plain, spec, llama in (("a", 10.0, 20.0, 10.0), ("b", 20.0, 30.0, 30.0), ("c", 10.0, 30.0, 15.0)):
        for engine, tps in (("ours_plain", plain), ("ours_adaptive", spec), ("llama_spec", llama)):
            rows.append({"threads": 1, "rep": 0, "id": pid, "kind": "edit", "engine": engine, "decode_tps": tps,
                         "acceptance": 0.5 if engine != "ours_plain" else None})
    s = compare_spec.summarize_group(rows, 1, ["a", "b", "c"], ["ours_plain", "ours_adaptive", "llama_spec"])
    assert s["tps"]["ours_adaptive"] == 30.0
    assert s["ratios"]["ours_adaptive/ours_plain"] == 2.0  # median of 2.0, 1.5, 3.0
    assert s["ratios"]["ours_adaptive/llama_spec"] == 2.0  # median of 2.0, 1.0, 2.0
    assert s["acceptance"]["ours_adaptive"] == 0.5


def test_cpu_tag_names_family_and_cores():
    assert re.fullmatch(r"[a-z0-9]+-\d+core", compare_spec.cpu_tag())


def cli_has_spec():
    if not os.access(BIN, os.X_OK):
        return False
    return "--spec" in subprocess.run([BIN, "run", "--help"], stdout=subprocess.PIPE, text=True).stdout


@pytest.mark.skipif(not cli_has_spec() or not os.path.isfile(QWEN_05B),
                    reason="needs a cactus build whose `run` has --spec, and qwen2.5-coder-0.5b.gguf")
def test_greedy_check_runs_end_to_end(tmp_path):
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "bench", "compare_spec.py"), "--check-greedy",
                           "--cactus", BIN, "--target", QWEN_05B, "--draft", QWEN_05B, "--kinds", "edit",
                           "--per-kind", "1", "-n", "8", "--threads", "2", "--out", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert doc["runs"] == 2 and doc["identical"] == 2


def test_claims_are_checked_per_thread_count():
    summary = [{"threads": 1, "group": "edit+summary",
                "ratios": {"ours_adaptive/ours_plain": 1.6, "ours_adaptive/llama_spec": 1.1}},
               {"threads": 1, "group": "chat", "ratios": {"ours_adaptive/ours_plain": 0.97}}]
    claims = compare_spec.check_claims(summary)
    assert [(c["ratio"], c["met"]) for c in claims] == [
        ("ours_adaptive/ours_plain", True), ("ours_adaptive/llama_spec", False), ("ours_adaptive/ours_plain", True)]
