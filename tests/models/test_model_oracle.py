"""Our forward pass vs llama.cpp (llama-cpp-python) on the real model files.

For each model and each prompt (tokenized by llama.cpp itself, BOS as llama.cpp adds it):
  * llama.cpp's 32-token greedy continuation and, at every step, its top-64 log-probabilities
    are cached as a JSON fixture (~/.cache/cactus/oracle/fixtures/, keyed by file size + mtime);
  * bin/model_probe generates 32 greedy tokens from the prompt (prefill + single-token decode),
    and scores llama.cpp's sequence by teacher forcing (one batched forward with all logits);
  * the single-token decode path is scored too (test_decode_path_matches_llama_cpp): llama.cpp's
    continuation fed one token at a time after a prefill in chunks of 512 or 16 tokens, at 1 and
    2 threads; per-step KL against llama.cpp's log-probabilities, same bounds as below;
  * a prompt passes when the continuations are identical, or else when the mean KL divergence
    KL(llama || ours) over the 32 steps is below 0.02 nats, and the mean over all prompts must stay
    below 0.006 nats. KL is computed over llama.cpp's top-64 tokens plus one bucket for the
    remaining mass (a lower bound of the full KL that is tight when the top-64 hold nearly all the
    mass, as they do here). Measured: means 0.003 (smollm2) and 0.0046 (gemma3); single prompts of
    gemma3 reach 0.008 to 0.010 and move by 0.002 with last-bit changes of a kernel (e.g. another exp
    polynomial), hence the looser per-prompt bound and the tight mean.
"""
import json
import math
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
MODELS_DIR = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
FIXTURES_DIR = os.path.expanduser("~/.cache/cactus/oracle/fixtures")
PROBE = os.path.join(BUILD_DIR, "bin", "model_probe")

N_PREDICT = 32
TOP_K = 64
KL_LIMIT = 0.02       # per diverging prompt
MEAN_KL_LIMIT = 0.006  # over all prompts
N_CTX = 2048

MODELS = ["smollm2-135m.gguf", "gemma3-270m.gguf", "qwen2.5-coder-0.5b.gguf"]

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Q: What is 17 multiplied by 23?\nA:",
    "The three primary colors are",
    "import numpy as np\n\nx = np.linspace(0, 1, 100)\ny =",
    "Photosynthesis is the process by which",
    "List of the planets in the solar system:\n1. Mercury\n2.",
    "<html>\n<head>\n<title>My page</title>\n</head>\n<body>\n",
    "In 1969, Neil Armstrong",
    "Translate to French: 'Good morning, how are you?'\nFrench:",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "SELECT name, age FROM users WHERE",
    "Dear hiring manager,\n\nI am writing to apply for",
    "The mitochondria is the powerhouse of the",
    "Water boils at 100 degrees Celsius, which is",
    "{\"name\": \"Alice\", \"age\": 30, \"city\":",
    "A haiku about autumn:\n",
    "Les chats sont des animaux",
    "To make a cup of tea, first",
    "1, 2, 3, 5, 8, 13, 21,",
    "Emoji test: 🙂🚀 and accents: café, naïve, jalapeño. Then",
]

LONG_PARAGRAPHS = [
    "The history of the lighthouse at Pointe Noire begins in 1832, when the harbour master, a "
    "stubborn man named Elias Varga, wrote forty-one letters to the ministry asking for a light.",
    "Every letter described a different shipwreck: the brig Constance lost with its cargo of salt, "
    "the fishing boat Marie-Louise broken on the northern reef, the steamer Aurora run aground.",
    "The ministry answered none of them until a minister's nephew drowned on the same reef; within "
    "a year a tower of grey granite stood on the headland, forty metres tall, with a Fresnel lens.",
    "Varga became its first keeper. He kept a logbook in which he wrote the weather at six, noon and "
    "midnight, the ships that passed, the birds that struck the glass, and the price of lamp oil.",
    "His daughter Ana took over the light in 1871. She added to the logbook the tides, the phases "
    "of the moon, and short notes about the village: a wedding, a fire in the bakery, a new school.",
    "In 1903 the lamp was converted from oil to paraffin vapour, and in 1931 to electricity; each "
    "change is recorded in the logbook with a drawing of the new mechanism and a list of its parts.",
    "During the war the light was dark for four years. The logbook for those years contains only "
    "the weather, written in pencil, and once, in March 1943, the words 'planes over the bay'.",
    "After the war a museum was opened in the keeper's house. Visitors can read the logbooks, climb "
    "the two hundred and twelve steps, and look out over the reef where the Constance was lost.",
]

LONG_PROMPT = "\n\n".join(LONG_PARAGRAPHS * 3) + "\n\nIn summary, the logbooks show that"


def model_path(name):
    return os.path.join(MODELS_DIR, name)


def fixture_path(name):
    st = os.stat(model_path(name))
    return os.path.join(FIXTURES_DIR, f"models_{name}_{st.st_size}_{int(st.st_mtime)}_v1.json")


def log_softmax(row):
    import numpy as np

    row = np.asarray(row, dtype=np.float64)
    m = row.max()
    return row - (m + math.log(np.exp(row - m).sum()))


def generate_fixture(name):
    """Runs llama.cpp: tokenization, greedy continuation and top-k log-probs of every step."""
    import numpy as np
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model_path(name), n_ctx=N_CTX, logits_all=True,
                          n_threads=2, n_batch=512, verbose=False)
    cases = []
    for text in PROMPTS + [LONG_PROMPT]:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        llm.reset()
        llm.eval(tokens)
        continuation, top_ids, top_logprobs = [], [], []
        for _ in range(N_PREDICT):
            lp = log_softmax(llm.scores[llm.n_tokens - 1])
            best = np.argsort(-lp)[:TOP_K]
            top_ids.append([int(i) for i in best])
            top_logprobs.append([float(lp[i]) for i in best])
            continuation.append(int(best[0]))
            llm.eval([int(best[0])])
        cases.append({"text": text, "tokens": tokens, "continuation": continuation,
                      "top_ids": top_ids, "top_logprobs": top_logprobs})
    return {"model": name, "cases": cases}


def load_fixture(name):
    path = fixture_path(name)
    if not os.path.exists(path):
        os.makedirs(FIXTURES_DIR, exist_ok=True)
        data = generate_fixture(name)
        with open(path + ".tmp", "w") as f:
            json.dump(data, f)
        os.replace(path + ".tmp", path)
    with open(path) as f:
        return json.load(f)


class Probe:
    def __init__(self, name, threads=2, extra=()):
        assert os.path.exists(PROBE), f"{PROBE} is not built"
        self.proc = subprocess.Popen([PROBE, model_path(name), "--threads", str(threads),
                                      "--ctx", str(N_CTX), *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "model_probe exited"
        reply = json.loads(line)
        assert "error" not in reply, reply["error"]
        return reply

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait() == 0


def bucket_kl(p_logprobs, q_logprobs):
    """KL(p || q) over the given tokens plus one bucket for the rest of the mass."""
    p = [math.exp(x) for x in p_logprobs]
    q = [math.exp(x) for x in q_logprobs]
    kl = sum(pi * (lp - lq) for pi, lp, lq in zip(p, p_logprobs, q_logprobs))
    p_rest = max(1.0 - sum(p), 1e-12)
    q_rest = max(1.0 - sum(q), 1e-12)
    return kl + p_rest * math.log(p_rest / q_rest)


def evaluate(name):
    fixture = load_fixture(name)
    probe = Probe(name)
    results = []
    try:
        for case in fixture["cases"]:
            prompt, cont = case["tokens"], case["continuation"]
            ours = probe.ask({"tokens": prompt, "n_predict": N_PREDICT})["generated"]
            scored = probe.ask({"tokens": prompt + cont, "score_from": len(prompt),
                                "score_ids": case["top_ids"]})
            kls = [bucket_kl(p, q) for p, q in zip(case["top_logprobs"], scored["score_logprobs"])]
            agree = sum(a == b for a, b in zip(scored["argmax"], cont))
            results.append({"n_prompt": len(prompt), "identical": ours == cont,
                            "mean_kl": sum(kls) / len(kls), "max_kl": max(kls),
                            "argmax_agree": agree, "ours": ours, "theirs": cont})
    finally:
        probe.close()
    return results


# (threads, prefill chunk): each thread count and each chunk size once (CI time; the four
# combinations gave the same KL when all were run).
DECODE_CONFIGS = [(1, 16), (2, 512)]
DECODE_PROMPTS = 8  # the first prompts and the long one, for each configuration


def evaluate_decode_path(name, threads, chunk):
    """KL per step of the single-token decode path (llama.cpp's continuation fed one token at a
    time after a chunked prefill) against llama.cpp's own per-step log-probabilities."""
    fixture = load_fixture(name)
    cases = fixture["cases"][:DECODE_PROMPTS] + fixture["cases"][-1:]
    probe = Probe(name, threads=threads, extra=("--batch", str(chunk)))
    results = []
    try:
        for case in cases:
            reply = probe.ask({"tokens": case["tokens"], "chunk": chunk, "decode_ids": case["continuation"],
                               "score_ids": case["top_ids"]})
            kls = [bucket_kl(p, q) for p, q in zip(case["top_logprobs"], reply["decode_logprobs"])]
            assert len(kls) == N_PREDICT
            agree = sum(a == b for a, b in zip(reply["decode_argmax"], case["continuation"]))
            results.append({"n_prompt": len(case["tokens"]), "mean_kl": sum(kls) / len(kls),
                            "max_kl": max(kls), "argmax_agree": agree})
    finally:
        probe.close()
    return results


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("threads,chunk", DECODE_CONFIGS)
def test_decode_path_matches_llama_cpp(name, threads, chunk):
    assert os.path.exists(model_path(name)), f"model file {model_path(name)} is missing"
    results = evaluate_decode_path(name, threads, chunk)
    assert max(r["n_prompt"] for r in results) > 600  # the long prompt spans many chunks
    mean_kl = sum(r["mean_kl"] for r in results) / len(results)
    print(f"\n{name} decode path, {threads} thread(s), chunk {chunk}: mean KL {mean_kl:.5f}, "
          f"max step KL {max(r['max_kl'] for r in results):.5f}, "
          f"argmax agreement {sum(r['argmax_agree'] for r in results)}/{N_PREDICT * len(results)}")
    for i, r in enumerate(results):
        assert r["mean_kl"] < KL_LIMIT, f"prompt {i}: decode-path mean KL {r['mean_kl']:.4f} >= {KL_LIMIT}: {r}"
    assert mean_kl < MEAN_KL_LIMIT


@pytest.mark.parametrize("name", MODELS)
def test_matches_llama_cpp(name):
    assert os.path.exists(model_path(name)), f"model file {model_path(name)} is missing"
    results = evaluate(name)
    assert len(results) >= 21
    assert max(r["n_prompt"] for r in results) > 600
    identical = sum(r["identical"] for r in results)
    mean_kl = sum(r["mean_kl"] for r in results) / len(results)
    print(f"\n{name}: {identical}/{len(results)} identical continuations, "
          f"mean KL {mean_kl:.5f}, max step KL {max(r['max_kl'] for r in results):.5f}")
    for i, r in enumerate(results):
        print(f"  prompt {i:2d} ({r['n_prompt']:4d} tok): identical={r['identical']} "
              f"mean_kl={r['mean_kl']:.5f} argmax_agree={r['argmax_agree']}/{N_PREDICT}")
    for i, r in enumerate(results):
        assert r["identical"] or r["mean_kl"] < KL_LIMIT, \
            f"prompt {i}: continuation differs and mean KL {r['mean_kl']:.4f} >= {KL_LIMIT}: {r}"
    assert mean_kl < MEAN_KL_LIMIT
