"""Embeddings and rerank through `cactus serve`: the openai client (float, base64, lists, dimensions),
the ollama client (/api/embed, /api/embeddings), llama-server's /embeddings and /rerank, the same
vectors as `cactus embed`, an encoder-only server, and 400s for bad inputs. The embedding model is
all-minilm-l6-v2 when pulled (`cactus pull all-minilm-l6-v2`), else smollm2-135m's hidden states.
Run:
    CACTUS_BUILD_DIR=build ~/.cache/cactus/oracle/venv/bin/python -m pytest -q tests/server/test_embeddings.py
"""
import base64
import json
import math
import os
import struct
import subprocess

import ollama
import openai
import pytest

from serverproc import BIN, MODEL, MODELS, ServerProcess

MINILM = os.path.join(MODELS, "all-minilm-l6-v2.gguf")
HAVE_MINILM = os.path.isfile(MINILM)
EMBED_MODEL = MINILM if HAVE_MINILM else MODEL
TEXTS = ["The cat sat on the mat.", "Paris is the capital of France."]


@pytest.fixture(scope="module")
def emb_server():
    """smollm2 serves chat; the embedding model is MiniLM (--embedding-model) when present, else
    smollm2's own file loaded a second time on the first embedding request."""
    extra = ["--embedding-model", MINILM] if HAVE_MINILM else []
    s = ServerProcess("--parallel", "1", "-t", "2", "--embeddings", "--reranking", *extra)  # llama-server's flags
    yield s
    assert s.stop() == 0


def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def close(a, b, tol=1e-5):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= tol


def cli_embed(*args, model=EMBED_MODEL, stdin=None):
    proc = subprocess.run([BIN, "embed", "-m", model, "-t", "2", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_openai_client_float_base64_and_lists(emb_server):
    c = oai(emb_server)
    r = c.embeddings.create(model="emb", input=TEXTS)
    assert r.object == "list" and [d.index for d in r.data] == [0, 1]
    assert r.usage.prompt_tokens == r.usage.total_tokens > 4
    dim = len(r.data[0].embedding)
    assert dim in (384, 576) and all(abs(norm(d.embedding) - 1) < 1e-4 for d in r.data)
    # Without encoding_format the client asks for base64 and decodes it; floats must agree.
    floats = c.embeddings.create(model="emb", input=TEXTS, encoding_format="float")
    assert all(close(a.embedding, b.embedding, 1e-7) for a, b in zip(floats.data, r.data))
    raw = c.embeddings.create(model="emb", input=TEXTS[1], encoding_format="base64").data[0].embedding
    wire = base64.b64decode(raw)
    assert close(list(struct.unpack("<%df" % dim, wire)), r.data[1].embedding, 1e-6)  # alone vs in a batch
    props = json.loads(emb_server.get("/props")[1])
    assert props["embedding_model"] == EMBED_MODEL
    listed = [m.id for m in c.models.list().data]
    assert listed[0] == "smollm2-135m" and ("all-minilm-l6-v2" in listed) == HAVE_MINILM
    ids = emb_server.post("/tokenize", {"content": TEXTS[0]}) if not HAVE_MINILM else None
    if ids is not None:  # token-id input (smollm2's tokenizer is the server's own)
        tokens = json.loads(ids[1])["tokens"]
        t = c.embeddings.create(model="emb", input=[tokens, TEXTS[1]])
        assert len(t.data) == 2 and close(t.data[1].embedding, r.data[1].embedding, 1e-5)


def test_same_vectors_as_cactus_embed(emb_server):
    served = oai(emb_server).embeddings.create(model="emb", input=TEXTS)
    rc, lines, err = cli_embed(*TEXTS)
    assert rc == 0, err
    assert [l["index"] for l in lines] == [0, 1] and all(l["n_tokens"] > 2 for l in lines)
    for line, d in zip(lines, served.data):
        assert close(line["embedding"], d.embedding)
    rc, piped, err = cli_embed(stdin="\n".join(TEXTS) + "\n")
    assert rc == 0 and [l["embedding"] for l in piped] == [l["embedding"] for l in lines], err
    rc, raw, _ = cli_embed("--no-normalize", TEXTS[0])
    assert rc == 0 and abs(norm(raw[0]["embedding"]) - 1) > 1e-3
    rc, rows, _ = cli_embed("--pooling", "none", TEXTS[0])
    assert rc == 0 and len(rows[0]["embedding"]) == rows[0]["n_tokens"] == lines[0]["n_tokens"]
    rc, _, err = cli_embed("--no-truncate", "word " * 9000)
    assert rc == 1 and err.startswith("error:")


def test_cli_errors_exit_1():
    rc, _, err = cli_embed(stdin="")
    assert rc == 1 and "no text" in err
    rc, _, err = cli_embed("x", model="/nonexistent.gguf")
    assert rc == 1 and err


def test_dimensions(emb_server):
    c = oai(emb_server)
    full = c.embeddings.create(model="emb", input=TEXTS[0]).data[0].embedding
    cut = c.embeddings.create(model="emb", input=TEXTS[0], dimensions=8).data[0].embedding
    head = full[:8]
    assert len(cut) == 8 and close(cut, [x / norm(head) for x in head], 1e-5)
    for bad in (0, -3, len(full) + 1):
        with pytest.raises(openai.BadRequestError) as e:
            c.embeddings.create(model="emb", input="x", dimensions=bad)
        assert e.value.body["param"] == "dimensions"


def test_ollama_client_embed_and_legacy(emb_server):
    c = ollama.Client(host=emb_server.url, timeout=120)
    r = c.embed(model="emb", input=TEXTS)
    assert len(r.embeddings) == 2 and all(abs(norm(v) - 1) < 1e-4 for v in r.embeddings)
    assert r.prompt_eval_count > 4 and r.total_duration > 0
    served = oai(emb_server).embeddings.create(model="emb", input=TEXTS)
    assert all(close(list(a), b.embedding) for a, b in zip(r.embeddings, served.data))
    assert len(c.embed(model="emb", input=TEXTS[0], dimensions=16).embeddings[0]) == 16
    legacy = list(c.embeddings(model="emb", prompt=TEXTS[0]).embedding)
    assert abs(norm(legacy) - 1) > 1e-3  # /api/embeddings is not normalised (Ollama's behaviour)
    assert close([x / norm(legacy) for x in legacy], list(r.embeddings[0]), 1e-4)
    with pytest.raises(ollama.ResponseError) as e:
        c.embed(model="emb", input=[])
    assert e.value.status_code == 400


def test_native_embeddings_normalisation(emb_server):
    status, body, _ = emb_server.post("/embeddings", {"content": TEXTS[0]})
    rows = json.loads(body)
    assert status == 200 and rows[0]["index"] == 0 and len(rows[0]["embedding"]) == 1
    assert abs(norm(rows[0]["embedding"][0]) - 1) < 1e-4
    status, body, _ = emb_server.post("/embedding", {"input": [TEXTS[0]], "embd_normalize": 1})
    v = json.loads(body)[0]["embedding"][0]
    assert status == 200 and abs(sum(abs(x) for x in v) - 1) < 1e-4
    status, body, _ = emb_server.post("/embeddings", {"content": TEXTS[0], "embd_normalize": -1})
    assert status == 200 and abs(norm(json.loads(body)[0]["embedding"][0]) - 1) > 1e-3


def test_rerank_puts_the_relevant_document_first(emb_server):
    docs = ["Bananas are a yellow fruit rich in potassium.", "Paris is the capital city of France.",
            "The stock market fell sharply on Monday."]
    status, body, _ = emb_server.post("/rerank", {"query": "What is the capital of France?", "documents": docs})
    r = json.loads(body)
    assert status == 200 and r["object"] == "list" and r["usage"]["prompt_tokens"] > 10
    scores = [x["relevance_score"] for x in r["results"]]
    assert r["results"][0]["index"] == 1 and scores == sorted(scores, reverse=True) and len(scores) == 3
    for path in ("/reranking", "/v1/rerank", "/v1/reranking"):
        status, body, _ = emb_server.post(path, {"query": "capital of France", "documents": docs, "top_n": 1,
                                                 "return_documents": True})
        results = json.loads(body)["results"]
        assert status == 200 and len(results) == 1 and results[0]["document"]["text"] == docs[1]


@pytest.mark.parametrize("path,body,param", [
    ("/v1/embeddings", {}, "input"),
    ("/v1/embeddings", {"input": ""}, "input"),
    ("/v1/embeddings", {"input": []}, "input"),
    ("/v1/embeddings", {"input": ["ok", ""]}, "input"),
    ("/v1/embeddings", {"input": 3.5}, "input"),
    ("/v1/embeddings", {"input": [{"text": "a"}]}, "input"),
    ("/v1/embeddings", {"input": [[1, "a"]]}, "input"),
    ("/v1/embeddings", {"input": [[]]}, "input"),
    ("/v1/embeddings", {"input": [[2000000000]]}, "input"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "hex"}, "encoding_format"),
    ("/v1/embeddings", {"input": "x", "truncate": "yes"}, "truncate"),
    ("/v1/embeddings", {"input": "word " * 9000, "truncate": False}, "input"),
    ("/embeddings", {"content": 7}, "content"),
    ("/rerank", {"documents": ["a"]}, "query"),
    ("/rerank", {"query": "q", "documents": []}, "documents"),
    ("/rerank", {"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
])
def test_bad_inputs_are_400s(emb_server, path, body, param):
    status, raw, _ = emb_server.post(path, body)
    err = json.loads(raw)["error"]
    assert status == 400 and err["type"] == "invalid_request_error" and err["param"] == param, raw


def test_bad_ollama_inputs_are_400s(emb_server):
    for path, body in (("/api/embed", {"input": ""}), ("/api/embed", {"input": 5}),
                       ("/api/embed", {"input": "x", "dimensions": 0}), ("/api/embeddings", {})):
        status, raw, _ = emb_server.post(path, body)
        assert status == 400 and isinstance(json.loads(raw)["error"], str), (path, raw)
    status, raw, _ = emb_server.post("/v1/embeddings", b"{not json")
    assert status == 400
    status, _, _ = emb_server.get("/health")
    assert status == 200


@pytest.mark.skipif(not HAVE_MINILM, reason="needs all-minilm-l6-v2 (cactus pull all-minilm-l6-v2)")
def test_encoder_only_server():
    s = ServerProcess("-t", "2", "--pooling", "none", model=MINILM, alias="all-minilm-l6-v2")
    try:
        status, raw, _ = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
        assert status == 400 and json.loads(raw)["error"]["code"] == "model_not_supported"
        status, raw, _ = s.post("/api/generate", {"model": "m", "prompt": "hi"})
        assert status == 400
        status, raw, _ = s.post("/v1/embeddings", {"input": "hi"})
        assert status == 400 and json.loads(raw)["error"]["param"] == "pooling"
        status, raw, _ = s.post("/embeddings", {"content": "hello hello hello"})
        rows = json.loads(raw)[0]["embedding"]
        assert status == 200 and len(rows) == 5 and all(abs(norm(r) - 1) > 1e-3 for r in rows)
        status, raw, _ = s.post("/embeddings", {"content": "word " * 600})
        assert status == 200 and len(json.loads(raw)[0]["embedding"]) == 512
        assert s.get("/v1/models")[0] == 200
    finally:
        assert s.stop() == 0


def test_lazy_decoder_embedder_leaves_chat_working():
    """Without --embedding-model, smollm2's server embeds with a second copy of its own file, loaded
    on the first embedding request; chat keeps working beside it. (A server of its own: the shared
    one's memory stays as test_load.py measures it.)"""
    server = ServerProcess("--parallel", "2", "-t", "2")
    try:
        check_lazy_decoder(server)
    finally:
        assert server.stop() == 0


def check_lazy_decoder(server):
    c = oai(server)
    e = c.embeddings.create(model="smollm2-135m", input=TEXTS[0]).data[0].embedding
    rc, lines, err = cli_embed(TEXTS[0], model=MODEL)
    assert rc == 0 and len(e) == 576 and close(lines[0]["embedding"], e), err
    reply = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert reply.choices[0].message.content


def test_a_bad_embedding_model_stops_the_start():
    for bad in ("/nonexistent.gguf", os.path.join(os.path.dirname(BIN), "cactus")):
        proc = subprocess.run([BIN, "serve", MODEL, "--port", "0", "-t", "2", "--embedding-model", bad],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "error:" in proc.stderr, proc.stderr
