"""Audio in chat through the C API and the Python package (Gemma 4 with the tiny audio tower of
audio_fixture.py; random weights, so only the plumbing is checked, never the words):
  * pcm_buffer (16-bit mono 16 kHz PCM) and a message's "audio" WAV file (44.1 kHz stereo, resampled)
    each complete; Model.chat(audio=...) takes a path, PCM bytes and a numpy float array;
  * a second turn about the same clip reuses its cached rows (prefill_tokens < prompt_tokens);
  * hostile audio (truncated, zero-length, no samples, absurd rate, not a WAV, odd byte counts, NULL
    with a size, a size of 0, over 30 s) fails with a clear error and the handle stays usable;
  * a text model keeps "this model has no audio encoder";
  * image + audio in one message when the mmproj holds both towers (C API, Model, `cactus run`);
  * `cactus run/chat --audio` and `cactus bench --mmproj` (a missing tower's section says so)."""
import ctypes
import json

import pytest

import audio_fixture as af

GREEDY = {"max_tokens": 4, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def audio_model(tmp_path_factory):
    import cactus
    handle = cactus.cactus_init(af.model_folder(tmp_path_factory, "audio"))
    yield handle
    cactus.cactus_destroy(handle)


def ask(text="What do you hear?", **extra):
    return [dict({"role": "user", "content": text}, **extra)]


def test_pcm_buffer_completes(audio_model):
    import cactus
    cactus.cactus_reset(audio_model)
    r = cactus.cactus_complete(audio_model, ask(), GREEDY, pcm=af.pcm16(af.tone(1.0)))
    assert r["success"] and r["decode_tokens"] == 4
    text_only = cactus.cactus_complete(audio_model, ask(), GREEDY)
    assert r["prompt_tokens"] > text_only["prompt_tokens"] + 20  # 1 s is 25 rows plus markers
    cactus.cactus_reset(audio_model)
    prefilled = cactus.cactus_prefill(audio_model, ask(), pcm=af.pcm16(af.tone(1.0)))
    assert prefilled["success"] and prefilled["prefill_tokens"] == r["prompt_tokens"], prefilled


def test_audio_file_completes_and_second_turn_reuses(audio_model, tmp_path):
    import cactus
    cactus.cactus_reset(audio_model)
    wav = af.write_wav(tmp_path / "stereo.wav", af.tone(1.5, rate=44100), rate=44100, channels=2)
    first = ask(audio=[wav])
    r1 = cactus.cactus_complete(audio_model, first, GREEDY)
    assert r1["success"]
    second = first + [{"role": "assistant", "content": r1["response"]}, {"role": "user", "content": "Again?"}]
    r2 = cactus.cactus_complete(audio_model, second, GREEDY)
    assert r2["prefill_tokens"] < r2["prompt_tokens"] - 30, r2  # the clip's rows came from the cache
    prompt = cactus.cactus_render_prompt(audio_model, first)
    assert prompt.count("<__audio__>") == 1


def test_model_chat_audio_argument(tmp_path, tmp_path_factory):
    import numpy as np
    import cactus
    with cactus.Model(af.model_folder(tmp_path_factory, "audio")) as m:
        wav = af.write_wav(tmp_path / "a.wav", af.tone(0.5))
        for clip in (wav, af.pcm16(af.tone(0.5)), np.asarray(af.tone(0.5), dtype=np.float32), [wav, wav]):
            text = m.chat(ask(), stream=False, options=GREEDY, audio=clip)
            assert isinstance(text, str) and m.last_response["decode_tokens"] == 4
        pieces = list(m.chat(ask(), options=GREEDY, audio=np.zeros(8000, dtype=np.float32)))
        assert m.last_response["success"] and "".join(pieces) == m.last_response["response"]
        one = m.complete(ask(), GREEDY, audio=wav)["prompt_tokens"]
        two = m.complete(ask(), GREEDY, audio=[wav, wav])["prompt_tokens"]
        assert two > one


def expect_error(fn, *needles):
    import cactus
    with pytest.raises(cactus.CactusError) as e:
        fn()
    message = str(e.value)
    assert any(n in message for n in needles), message
    return message


def raw_complete(handle, messages, pcm, size):
    from cactus.api import TOKEN_CALLBACK, cactus_get_last_error, lib
    buffer = ctypes.create_string_buffer(65536)
    rc = lib.cactus_complete(ctypes.c_void_p(handle), json.dumps(messages).encode(), buffer, len(buffer),
                             json.dumps(GREEDY).encode(), None, TOKEN_CALLBACK(lambda *a: None), None, pcm, size)
    return rc, cactus_get_last_error()


def test_hostile_audio_fails_clearly_and_the_handle_stays_usable(audio_model, tmp_path):
    import cactus
    for name, path in af.hostile_wavs(tmp_path).items():
        if name == "huge-size":  # a data chunk claiming 4 GiB: the samples present are read, in bounded memory
            assert cactus.cactus_complete(audio_model, ask(audio=[path]), GREEDY)["success"]
            continue
        expect_error(lambda: cactus.cactus_complete(audio_model, ask(audio=[path]), GREEDY), path)
    expect_error(lambda: cactus.cactus_complete(audio_model, ask(audio=[str(tmp_path / "missing.wav")]), GREEDY),
                 "missing.wav")
    expect_error(lambda: cactus.cactus_complete(audio_model, ask(), GREEDY, pcm=b"\x01\x02\x03"), "odd", "16-bit")
    expect_error(lambda: cactus.cactus_complete(audio_model, ask(), GREEDY, pcm=af.pcm16([0.0] * 16000 * 31)),
                 "30 s", "long")
    expect_error(lambda: cactus.cactus_complete(audio_model, [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}], GREEDY), "pcm_buffer")
    rc, error = raw_complete(audio_model, ask(), None, 64)
    assert rc < 0 and "NULL" in error
    rc, error = raw_complete(audio_model, ask(), b"\x00\x00", 0)
    assert rc < 0 and "0" in error
    rc, error = raw_complete(audio_model, [{"role": "system", "content": "x"}], b"\x00\x00", 2)
    assert rc < 0 and "user message" in error
    assert cactus.cactus_complete(audio_model, ask(), GREEDY)["success"]
    assert cactus.cactus_complete(audio_model, ask(), GREEDY, pcm=af.pcm16(af.tone(0.2)))["success"]


def test_text_model_has_no_audio_encoder(smollm, tmp_path):
    import cactus
    expect_error(lambda: cactus.cactus_complete(smollm, ask(), GREEDY, pcm=af.pcm16(af.tone(0.1))),
                 "this model has no audio encoder")
    wav = af.write_wav(tmp_path / "a.wav", af.tone(0.1))
    expect_error(lambda: cactus.cactus_complete(smollm, ask(audio=[wav]), GREEDY), "no audio encoder")
    assert cactus.cactus_complete(smollm, ask(), GREEDY)["success"]


def test_image_and_audio_in_one_message(tmp_path, tmp_path_factory):
    """C API, Python package and CLI with both towers: the image's and the clip's rows in one prompt."""
    import cactus
    folder = af.model_folder(tmp_path_factory, "vision,audio")
    png = af.write_bmp(tmp_path / "img.bmp", 64, 48)
    wav = af.write_wav(tmp_path / "a.wav", af.tone(0.5))
    handle = cactus.cactus_init(folder)
    try:
        r = cactus.cactus_complete(handle, ask(images=[png], audio=[wav]), GREEDY)
        assert r["success"] and r["decode_tokens"] == 4
        audio_only = cactus.cactus_complete(handle, ask(audio=[wav]), GREEDY)["prompt_tokens"]
        assert r["prompt_tokens"] > audio_only + 100, (r, audio_only)  # the image's rows too
        prompt = cactus.cactus_render_prompt(handle, ask(images=[png], audio=[wav]))
        assert prompt.index("<__media__>") < prompt.index("<__audio__>")
    finally:
        cactus.cactus_destroy(handle)
    with cactus.Model(folder) as m:
        m.chat(ask(images=[png]), stream=False, options=GREEDY, audio=af.pcm16(af.tone(0.5)))
        assert m.last_response["prompt_tokens"] == r["prompt_tokens"], m.last_response
    run = cactus_cli("run", folder, "--image", png, "--audio", wav, "-p", "What do you hear?", "-n", "4",
                     "--temperature", "0", "--ignore-eos")
    assert "prefill" in run.stderr, run.stderr


def cactus_cli(*args, stdin=None):
    import os
    import subprocess
    binary = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(af.ROOT, "build")), "bin", "cactus")
    proc = subprocess.run([binary, *args], input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_cli_run_chat_and_bench_with_audio(tmp_path, tmp_path_factory):
    folder = af.model_folder(tmp_path_factory, "audio")
    wav = af.write_wav(tmp_path / "a.wav", af.tone(0.8, rate=8000), rate=8000)
    greedy = ["-n", "4", "--temperature", "0", "--ignore-eos"]
    once = cactus_cli("run", folder, "--audio", wav, "-p", "What do you hear?", *greedy)
    twice = cactus_cli("run", folder, "--audio", wav, "--audio", wav, "-p", "What do you hear?", *greedy)
    prefill = [int(p.stderr.split("prefill ")[1].split(" tok")[0]) for p in (once, twice)]
    assert prefill[1] > prefill[0] + 15, prefill  # 0.8 s is 20 rows plus markers
    chat = cactus_cli("chat", folder, "--metrics", *greedy, stdin="/audio %s\nWhat is it?\nAnd again?\n/exit\n" % wav)
    assert "error" not in chat.stderr and chat.stderr.count("prefill") == 2, chat.stderr
    import json
    bench = json.loads(cactus_cli("bench", folder, "--mmproj", folder + "/gemma4-mmproj.gguf", "-t", "1", "--reps",
                                  "1", "--json").stdout)
    assert bench["vision"]["skipped"] and bench["audio"]["results"][0]["audio_tokens"] == 250, bench
    vision_only = str(tmp_path / "vision-mmproj.gguf")
    try:
        af.write_mmproj(vision_only, "vision")
    except Exception as e:  # pytest's skip too: the vision tower is the vision helper's
        pytest.skip("no Gemma 4 vision fixture: %s" % e)
    bench = json.loads(cactus_cli("bench", af.text_model(), "--mmproj", vision_only, "-t", "1", "--reps", "1",
                                  "--json").stdout)
    assert bench["audio"]["skipped"] and bench["vision"]["results"][0]["image_tokens"] > 0, bench
