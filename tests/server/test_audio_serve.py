"""Audio in `cactus serve` chat requests, on the reduced Gemma 4 text model with the tiny audio tower
(python/tests/audio_fixture.py; random weights: the plumbing, never the words):

  * an OpenAI input_audio part (base64 WAV) gives the same greedy answer (8 tokens) as `cactus run
    --mmproj --audio` on the same prompt, and a message's own "audio" path the same again;
  * a second turn about the same clip reuses the slot's cached rows (cached_tokens past the clip);
  * errors, each a 400 naming the problem while the server keeps serving: bad base64, a format other
    than wav, a truncated WAV, a zero-length WAV, a clip over 30 s, a missing file;
  * a server without an audio tower (the shared smollm2 server) refuses audio with a 400 saying so;
  * with both towers an image_url and an input_audio part go into one prompt."""
import base64
import json
import os
import subprocess
import sys

import pytest

from serverproc import BIN, ServerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "tests"))

import audio_fixture as af  # noqa: E402

PROMPT = "What do you hear?"
GREEDY = {"max_tokens": 8, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = af.model_folder(tmp_path_factory, "audio")
    wav = af.write_wav(os.path.join(folder, "clip.wav"), af.tone(1.0, rate=22050, freq=330.0), rate=22050)
    return folder, os.path.join(folder, "gemma4-mmproj.gguf"), wav


@pytest.fixture(scope="module")
def aserver(pair):
    folder, mmproj, _ = pair
    s = ServerProcess("--parallel", "1", "-t", "2", "--prefill-chunk", "16", "--mmproj", mmproj,
                      model=os.path.join(folder, "gemma4-reduced.gguf"), alias="g4")
    yield s
    assert s.stop() == 0


def audio_part(data, fmt="wav"):
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


def ask_part(part, text=PROMPT):
    return [{"role": "user", "content": [part, {"type": "text", "text": text}]}]


def chat(server, messages, **extra):
    body = {"model": "g4", "messages": messages}
    body.update(GREEDY)
    body.update(extra)
    status, raw, _ = server.post("/v1/chat/completions", body)
    return status, json.loads(raw)


def test_input_audio_answers_equal_cactus_run(pair, aserver):
    folder, mmproj, wav = pair
    proc = subprocess.run([BIN, "run", os.path.join(folder, "gemma4-reduced.gguf"), "--mmproj", mmproj, "--audio",
                           wav, "-p", PROMPT, "-n", "8", "--temperature", "0", "--ignore-eos", "--template-system"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(wav, "rb") as f:
        data = f.read()
    status, body = chat(aserver, ask_part(audio_part(data)))
    assert status == 200, body
    assert body["choices"][0]["message"]["content"].strip() == proc.stdout.strip(), body
    status, own = chat(aserver, [{"role": "user", "content": PROMPT, "audio": [wav]}])
    assert status == 200 and own["choices"][0]["message"]["content"] == body["choices"][0]["message"]["content"]
    status, props, _ = aserver.get("/props")
    assert json.loads(props)["modalities"]["audio"] is True


def test_second_turn_reuses_the_clip_rows(pair, aserver):
    with open(pair[2], "rb") as f:
        part = audio_part(f.read())
    first = ask_part(part)
    status, body = chat(aserver, first)
    assert status == 200, body
    second = first + [{"role": "assistant", "content": body["choices"][0]["message"]["content"]},
                      {"role": "user", "content": "And now?"}]
    status, body = chat(aserver, second)
    assert status == 200, body
    usage = body["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] > 25, usage  # past the clip's 25 rows


def test_audio_errors_are_400s_and_the_server_keeps_serving(pair, aserver, tmp_path):
    good = af.wav_bytes(af.tone(0.5))
    cases = [
        (ask_part({"type": "input_audio", "input_audio": {"data": "@@not base64@@", "format": "wav"}}), "base64"),
        (ask_part(audio_part(good, "mp3")), "mp3"),
        (ask_part(audio_part(good[:30])), "input_audio"),
        (ask_part(audio_part(b"")), "input_audio"),
        (ask_part(audio_part(af.wav_bytes([0.0] * 16000 * 31))), "input_audio"),
        ([{"role": "user", "content": PROMPT, "audio": ["/nonexistent/clip.wav"]}], "/nonexistent/clip.wav"),
    ]
    for messages, words in cases:
        status, body = chat(aserver, messages)
        assert status == 400, body
        assert words in body["error"]["message"] and body["error"]["param"] == "messages", body
    status, body = chat(aserver, ask_part(audio_part(good)), max_tokens=2)
    assert status == 200 and body["usage"]["completion_tokens"] == 2, body


def test_server_without_audio_tower_refuses_audio(server):
    status, raw, _ = server.post("/v1/chat/completions", {"model": "m", "max_tokens": 2,
                                                           "messages": ask_part(audio_part(af.wav_bytes([0.0] * 800)))})
    body = json.loads(raw)
    assert status == 400 and "no audio tower" in body["error"]["message"], body
    status, raw, _ = server.post("/v1/chat/completions", {"model": "m", "max_tokens": 2,
                                                           "messages": [{"role": "user", "content": "Say hi."}]})
    assert status == 200, raw


def test_image_and_audio_in_one_request(tmp_path_factory, tmp_path):
    folder = af.model_folder(tmp_path_factory, "vision,audio")
    bmp = af.write_bmp(tmp_path / "img.bmp", 64, 48)
    s = ServerProcess("--parallel", "1", "-t", "2", "--mmproj", os.path.join(folder, "gemma4-mmproj.gguf"),
                      model=os.path.join(folder, "gemma4-reduced.gguf"), alias="g4")
    try:
        parts = [{"type": "image_url", "image_url": {"url": bmp}}, audio_part(af.wav_bytes(af.tone(0.5))),
                 {"type": "text", "text": PROMPT}]
        status, both = chat(s, [{"role": "user", "content": parts}])
        assert status == 200, both
        status, audio_only = chat(s, [{"role": "user", "content": parts[1:]}])
        assert status == 200, audio_only
        assert both["usage"]["prompt_tokens"] > audio_only["usage"]["prompt_tokens"] + 100, (both, audio_only)
        status, props, _ = s.get("/props")
        assert json.loads(props)["modalities"] == {"vision": True, "video": False, "audio": True}
    finally:
        assert s.stop() == 0
