"""Images in `cactus serve` chat requests, on the random-weight SmolVLM pair of
tests/models/vision/make_vlm_gguf.py (text.gguf + mmproj.gguf, small widths):

  * `serve --mmproj` (prefill chunks of 40 rows, cutting the images): an OpenAI image_url part with a local path, a file:// URL or a
    data:image/png;base64 URL gives the same greedy answer (16 tokens) as `cactus run --mmproj
    --image` on the same prompt; two requests with different images decode together and each equals
    its answer alone;
  * errors, each a 400 naming the problem while the server keeps serving: a remote URL (not
    fetched), bad base64, a data: URL that is not an image, a data: URL that is not data:image/...;
    base64, a missing file;
  * Gemma 3 (the real gemma3-270m text, a synthetic 16-row projector): with prefill chunks of 8 the
    image's bidirectional span is still prefilled whole (first-token log-probabilities equal those of
    chunks of 512; a cut span changes them) and the answer equals `cactus run`'s;
  * /v1/responses' input_image and /v1/messages' base64 image block answer as chat's image_url does;
  * a server without a projector (the shared smollm2 server) refuses images with a 400 saying so,
    never an answer without them; Ollama's base64 'images' are refused with a pointer to image_url.
"""
import base64
import json
import os
import subprocess
import sys
import threading

import pytest

from serverproc import BIN, ServerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models", "vision"))

import make_vlm_gguf as mk  # noqa: E402
import vision_images  # noqa: E402

PROMPT = "Describe the image."
GREEDY = {"max_tokens": 16, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve_vlm")
    text, mmproj = str(d / "text.gguf"), str(d / "mmproj.gguf")
    mk.write_idefics3_mmproj(mmproj, mk.IDEFICS3_SMALL, seed=5)
    mk.write_llama_text(text, mk.IDEFICS3_SMALL["proj_dim"], mk.IDEFICS3_SPECIALS)
    pngs = []
    for i, (w, h) in enumerate([(300, 200), (97, 389)]):
        path = str(d / ("img%d.png" % i))
        vision_images.write_png(path, vision_images.image(w, h, i))
        pngs.append(path)
    return text, mmproj, pngs


@pytest.fixture(scope="module")
def vserver(pair):
    text, mmproj, _ = pair
    # A prefill chunk of 40 cuts the images' rows across steps.
    s = ServerProcess("--parallel", "2", "-t", "2", "--prefill-chunk", "40", "--mmproj", mmproj, model=text,
                      alias="vlm")
    yield s
    assert s.stop() == 0


def ask(url, text=PROMPT):
    return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": text}]}]


def chat(server, messages, **extra):
    body = {"model": "vlm", "messages": messages}
    body.update(GREEDY)
    body.update(extra)
    status, raw, _ = server.post("/v1/chat/completions", body)
    return status, json.loads(raw)


def run_answer(text, mmproj, png):
    proc = subprocess.run([BIN, "run", text, "--mmproj", mmproj, "--image", png, "-p", PROMPT, "-n", "16",
                           "--temperature", "0", "--ignore-eos", "--template-system"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def data_url(path):
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def test_image_answers_equal_cactus_run(pair, vserver):
    text, mmproj, pngs = pair
    expected = [run_answer(text, mmproj, p) for p in pngs]
    assert expected[0] != expected[1], "another image must give another answer"
    for png, want in zip(pngs, expected):
        for url in (png, "file://" + png, data_url(png)):
            status, body = chat(vserver, ask(url))
            assert status == 200, body
            assert body["choices"][0]["message"]["content"].strip() == want, (url[:40], body)
            assert body["usage"]["completion_tokens"] == 16
    # Both images at once (two slots, one batch per step): each equals its answer alone.
    got = [None, None]

    def one(i):
        got[i] = chat(vserver, ask(pngs[i]))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (status, body), want in zip(got, expected):
        assert status == 200 and body["choices"][0]["message"]["content"].strip() == want, body


def test_responses_and_messages_images_answer_as_chat(pair, vserver):
    """/v1/responses' input_image and /v1/messages' base64 image block reach the model as chat's
    image_url part does: the same greedy answer."""
    png = pair[2][0]
    status, body = chat(vserver, ask(data_url(png)))
    assert status == 200, body
    want = body["choices"][0]["message"]["content"]
    status, raw, _ = vserver.post("/v1/responses", dict(GREEDY, max_output_tokens=16, input=[{"role": "user", "content": [
        {"type": "input_image", "image_url": data_url(png)}, {"type": "input_text", "text": PROMPT}]}]))
    r = json.loads(raw)
    assert status == 200 and r["output"][-1]["content"][0]["text"] == want, r
    with open(png, "rb") as f:
        b64 = base64.b64encode(f.read()).decode()
    status, raw, _ = vserver.post("/v1/messages", {"max_tokens": 16, "temperature": 0, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": b64}},
                                     {"type": "text", "text": PROMPT}]}]})
    m = json.loads(raw)
    assert status == 200 and m["content"][0]["text"] == chat(vserver, ask(data_url(png)), ignore_eos=False)[1][
        "choices"][0]["message"]["content"], m


@pytest.mark.parametrize("url, words", [
    ("https://example.com/cat.png", "not fetched"),
    ("data:image/png;base64,@@not base64@@", "not valid base64"),
    ("data:image/png;base64," + base64.b64encode(b"hello, not an image at all").decode(), "data: URL"),
    ("data:text/plain;base64,aGVsbG8=", "data:image/"),
    ("/nonexistent/photo.png", "/nonexistent/photo.png"),
])
def test_image_errors_are_400s_and_the_server_keeps_serving(vserver, pair, url, words):
    status, body = chat(vserver, ask(url))
    assert status == 400, body
    assert words in body["error"]["message"] and body["error"]["param"] == "messages", body
    status, body = chat(vserver, ask(pair[2][0]), max_tokens=2)
    assert status == 200 and body["usage"]["completion_tokens"] == 2, body


def test_server_without_projector_refuses_images(server, pair):
    png = pair[2][0]
    status, raw, _ = server.post("/v1/chat/completions", {"model": "m", "messages": ask(png), "max_tokens": 2})
    body = json.loads(raw)
    assert status == 400 and "no vision projector" in body["error"]["message"], body
    status, raw, _ = server.post("/api/chat", {"model": "smollm2-135m", "stream": False, "messages": [
        {"role": "user", "content": PROMPT, "images": [base64.b64encode(b"x").decode()]}]})
    assert status == 400 and "image_url" in raw.decode(), raw
    status, raw, _ = server.post("/v1/chat/completions", {"model": "m", "max_tokens": 2,
                                                           "messages": [{"role": "user", "content": "Say hi."}]})
    assert status == 200, raw


GEMMA = os.path.join(os.path.expanduser(os.environ.get("CACTUS_MODELS", "~/.cache/cactus/models")), "gemma3-270m.gguf")


def first_logprobs(server, png):
    status, body = chat(server, ask(png), max_tokens=4, logprobs=True, top_logprobs=5)
    assert status == 200, body
    content = body["choices"][0]["logprobs"]["content"]
    return body["choices"][0]["message"]["content"], [(t["token"], t["logprob"]) for t in content[0]["top_logprobs"]]


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="gemma3-270m.gguf not pulled")
def test_gemma3_image_span_stays_whole_across_small_chunks(tmp_path, pair):
    # Gemma 3's image rows attend to each other both ways: with prefill chunks of 8 the scheduler
    # must still prefill the image's 16 rows in one step (a cut span is silently causal in part), so
    # the first token's log-probabilities equal those of chunks of 512; the answer equals `cactus run`'s.
    mmproj = str(tmp_path / "gemma3-mmproj.gguf")
    mk.write_gemma3_mmproj(mmproj, mk.GEMMA3_SMALL, seed=7)
    png = pair[2][1]
    proc = subprocess.run([BIN, "run", GEMMA, "--mmproj", mmproj, "--image", png, "-p", PROMPT, "-n", "8",
                           "--temperature", "0", "--ignore-eos", "--template-system"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tops = []
    for chunk in ("8", "512"):
        s = ServerProcess("--parallel", "1", "-t", "2", "--prefill-chunk", chunk, "--mmproj", mmproj, model=GEMMA,
                          alias="vlm")
        try:
            status, body = chat(s, ask(png), max_tokens=8)
            assert status == 200, body
            assert body["choices"][0]["message"]["content"].strip() == proc.stdout.strip(), body
            tops.append(first_logprobs(s, png))
        finally:
            assert s.stop() == 0
    (text8, top8), (text512, top512) = tops
    assert [t for t, _ in top8] == [t for t, _ in top512], tops
    diff = max(abs(a - b) for (_, a), (_, b) in zip(top8, top512))
    print("gemma3 first-token logprob difference, chunks of 8 vs 512:", diff)
    assert diff < 2e-3, tops
