"""Images through the user-facing surfaces (C API via the Python package, and `cactus run`), on the
random-weight SmolVLM pair of make_vlm_gguf.py in one folder (text.gguf + mmproj.gguf):

  * a message's "images" gives the same prompt length, the same greedy text and the same mean
    probability of the greedy tokens (`confidence`, within 5e-4: every step's distribution) as
    llama.cpp's libmtmd on the same rendered prompt and images, for one image and for two images in
    one message plus one in a later message; another image gives another answer;
  * images as bytes (Python) and as OpenAI image_url parts (path or file://) equal images as paths;
  * a second turn reuses the cached prefix through the image (prefill_tokens counts only the new
    suffix) and answers as a fresh handle does;
  * errors: a missing file, a corrupt image and an image for a model without mmproj each name the
    problem, and a normal completion on the same handle succeeds afterwards;
  * `cactus run DIR --image PNG` and `--mmproj` print the same text as the C API;
  * SmolVLM's own chat template (it renders only content-part arrays) gets the marker as a text part,
    as llama.cpp's server does, and still agrees with libmtmd.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
LIBRARY = os.path.join(BUILD_DIR, "lib", "libcactus.so")
CLI = os.path.join(BUILD_DIR, "bin", "cactus")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
os.environ.setdefault("CACTUS_LIBRARY", LIBRARY)

import make_vlm_gguf as mk  # noqa: E402
import vision_images  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(LIBRARY), reason="lib/libcactus.so not built")

GREEDY = {"max_tokens": 16, "temperature": 0, "min_p": 0, "repetition_penalty": 1.0, "ignore_eos": True,
          "auto_handoff": False}
SIZES = [(640, 480), (300, 200), (97, 389)]  # 2x2 tiles + global, global only, 1x2 tiles


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("smolvlm")
    folder = d / "model"
    folder.mkdir()
    mk.write_idefics3_mmproj(str(folder / "mmproj.gguf"), mk.IDEFICS3_SMALL, seed=5)
    mk.write_llama_text(str(folder / "text.gguf"), mk.IDEFICS3_SMALL["proj_dim"], mk.IDEFICS3_SPECIALS)
    images, rgbs = [], []
    for i, (w, h) in enumerate(SIZES):
        rgb = vision_images.image(w, h, i)
        path = str(d / f"img{i}.png")
        vision_images.write_png(path, rgb)
        images.append(path)
        rgbs.append(rgb)
    return str(folder), images, rgbs


@pytest.fixture(scope="module")
def vlm(pair):
    import cactus
    os.environ.pop("CACTUS_MMPROJ", None)
    with cactus.Model(pair[0]) as model:
        yield model


def ask(text, images):
    return [{"role": "user", "content": text, "images": images}]


def test_image_answer_matches_libmtmd(pair, vlm):
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import mtmd_oracle
    folder, images, rgbs = pair
    text_path, mmproj = os.path.join(folder, "text.gguf"), os.path.join(folder, "mmproj.gguf")
    conversations = [
        (ask("Describe the image.", [images[0]]), [rgbs[0]]),
        (ask("Describe the image.", [images[2]]), [rgbs[2]]),
        (ask("Describe the image.", [images[1], images[2]]) + [{"role": "assistant", "content": "a image."}] +
         ask("the image.", [images[0]]), [rgbs[1], rgbs[2], rgbs[0]]),
    ]
    answers = []
    for messages, rgb in conversations:
        vlm.reset()
        prompt = vlm.render_prompt(messages)
        assert prompt.count("<__media__>") == len(rgb), prompt
        r = vlm.complete(messages, GREEDY)
        assert r["success"], r
        n_past, greedy, text, confidence = mtmd_oracle.mtmd_prompt_greedy(text_path, mmproj, prompt, rgb)
        assert r["prompt_tokens"] == n_past, (r["prompt_tokens"], n_past)
        assert r["decode_tokens"] == 16
        assert r["response"] == text.strip(), (r["response"], text, greedy)
        assert abs(r["confidence"] - confidence) < 5e-4, (r["confidence"], confidence, greedy)
        answers.append((r["response"], r["confidence"], abs(r["confidence"] - confidence)))
    print("C API vs libmtmd:", answers)
    assert answers[0] != answers[1], "another image must give another answer"


def test_bytes_equal_paths_and_prefix_reuse(pair, vlm):
    _, images, _ = pair
    vlm.reset()
    by_path = vlm.complete(ask("Describe the image.", [images[0]]), GREEDY)
    vlm.reset()
    with open(images[0], "rb") as f:
        by_bytes = vlm.complete(ask("Describe the image.", [f.read()]), GREEDY)
    assert by_bytes["response"] == by_path["response"]
    assert by_bytes["prompt_tokens"] == by_path["prompt_tokens"]
    # OpenAI content parts: an image_url part with a path or file:// URL is the same image.
    parts = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "file://" + images[0]}},
                                          {"type": "text", "text": "Describe the image."}]}]
    assert vlm.render_prompt(parts) == vlm.render_prompt(ask("Describe the image.", [images[0]]))
    vlm.reset()
    by_part = vlm.complete(parts, GREEDY)
    assert by_part["response"] == by_path["response"] and by_part["prompt_tokens"] == by_path["prompt_tokens"]
    vlm.reset()
    vlm.complete(ask("Describe the image.", [images[0]]), GREEDY)
    # Second turn: the image rows are reused (the same bytes under another path also match).
    copy = images[0] + ".copy.png"
    shutil.copyfile(images[0], copy)
    turn2 = ask("Describe the image.", [copy]) + [{"role": "assistant", "content": by_path["response"]},
                                                 {"role": "user", "content": "the image."}]
    second = vlm.complete(turn2, GREEDY)
    assert second["success"], second
    assert second["prefill_tokens"] < second["prompt_tokens"] - by_path["prompt_tokens"] + 20, second
    vlm.reset()
    fresh = vlm.complete(turn2, GREEDY)
    assert fresh["prefill_tokens"] == fresh["prompt_tokens"]
    assert fresh["response"] == second["response"]
    # A different image at the same place is not taken from the cache.
    vlm.reset()
    vlm.complete(ask("Describe the image.", [images[0]]), GREEDY)
    other = vlm.complete(ask("Describe the image.", [images[1]]), GREEDY)
    assert other["prefill_tokens"] >= other["prompt_tokens"] - 30, other


def test_image_errors_leave_handle_usable(pair, vlm, tmp_path):
    import cactus
    folder, images, _ = pair
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(open(images[0], "rb").read()[:200])  # truncated PNG
    not_image = tmp_path / "notes.png"
    not_image.write_text("hello")
    huge = tmp_path / "huge.png"
    raw = bytearray(open(images[1], "rb").read())
    raw[16:24] = (100000).to_bytes(4, "big") * 2  # IHDR width and height: 100000 x 100000
    huge.write_bytes(bytes(raw))
    cases = [(str(tmp_path / "missing.png"), "missing.png"), (str(corrupt), "corrupt.png"),
             (str(not_image), "notes.png"), (str(huge), "huge.png")]
    for path, name in cases:
        with pytest.raises(cactus.CactusError) as e:
            vlm.complete(ask("Describe the image.", [images[0], path]), GREEDY)
        assert name in str(e.value), str(e.value)
        ok = vlm.complete(ask("Describe the image.", [images[1]]), GREEDY)
        assert ok["success"] and ok["decode_tokens"] == 16
    with pytest.raises(cactus.CactusError) as e:
        vlm.complete([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}])
    assert "only local paths" in str(e.value), str(e.value)
    with pytest.raises(cactus.CactusError) as e:
        vlm.complete(ask("Describe the image.", [images[0]]), dict(GREEDY, bogus=1))
    assert "bogus" in str(e.value)
    # The text model alone (a .gguf path, no mmproj): a clear error, then text works.
    with cactus.Model(os.path.join(folder, "text.gguf")) as text_only:
        with pytest.raises(cactus.CactusError) as e:
            text_only.complete(ask("Describe the image.", [images[0]]), GREEDY)
        assert "no vision projector" in str(e.value), str(e.value)
        r = text_only.complete([{"role": "user", "content": "Describe the image."}], GREEDY)
        assert r["success"] and r["decode_tokens"] == 16


def test_mmproj_from_environment(pair, monkeypatch):
    import cactus
    folder, images, _ = pair
    monkeypatch.setenv("CACTUS_MMPROJ", os.path.join(folder, "mmproj.gguf"))
    with cactus.Model(os.path.join(folder, "text.gguf")) as model:
        assert model.complete(ask("Describe the image.", [images[2]]), GREEDY)["success"]
    monkeypatch.setenv("CACTUS_MMPROJ", os.path.join(folder, "nothing.gguf"))
    with pytest.raises(cactus.CactusError) as e:
        cactus.Model(os.path.join(folder, "text.gguf"))
    assert "CACTUS_MMPROJ" in str(e.value) and "nothing.gguf" in str(e.value)


@pytest.mark.skipif(not os.path.exists(CLI), reason="bin/cactus not built")
def test_cli_run_with_image(pair, vlm):
    folder, images, _ = pair
    env = dict(os.environ)
    env.pop("CACTUS_MMPROJ", None)
    args = ["-p", "Describe the image.", "--image", images[0], "-n", "16", "--ignore-eos", "-t", "2"]
    vlm.reset()
    want = vlm.complete(
        [{"role": "system", "content": "You are a helpful assistant."}] + ask("Describe the image.", [images[0]]),
        GREEDY)["response"]
    for model_args in ([folder], [os.path.join(folder, "text.gguf"), "--mmproj", os.path.join(folder, "mmproj.gguf")]):
        r = subprocess.run([CLI, "run", *model_args, *args], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want.strip(), (r.stdout, want)
    # Without the projector: an error naming the cause, not a crash.
    r = subprocess.run([CLI, "run", os.path.join(folder, "text.gguf"), *args], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode != 0 and "no vision projector" in r.stderr, (r.returncode, r.stderr)
    r = subprocess.run([CLI, "run", folder, "-p", "hi", "--image", "/nonexistent.png", "-n", "2"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode != 0 and "/nonexistent.png" in r.stderr, r.stderr
    # chat: --image for the first message, /image for a later one.
    r = subprocess.run([CLI, "chat", folder, "--image", images[1], "-n", "4", "--ignore-eos"],
                       input="Describe the image.\n/image " + images[2] + "\nthe image.\n/exit\n", capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "error" not in r.stderr, r.stderr
    assert len([line for line in r.stdout.splitlines() if line.strip()]) == 2, r.stdout
    print(json.dumps({"cli": r.stdout}))


# SmolVLM-256M-Instruct's chat template (tokenizer_config.json): it iterates content parts.
SMOLVLM_TEMPLATE = ("<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
                    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
                    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
                    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
                    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}")


def test_smolvlm_template_with_content_parts(pair, tmp_path):
    pytest.importorskip("llama_cpp.mtmd_cpp")
    import cactus
    import mtmd_oracle
    folder, images, rgbs = pair
    mine = tmp_path / "templated"
    mine.mkdir()
    shutil.copyfile(os.path.join(folder, "mmproj.gguf"), mine / "mmproj.gguf")
    mk.write_llama_text(str(mine / "text.gguf"), mk.IDEFICS3_SMALL["proj_dim"], mk.IDEFICS3_SPECIALS,
                        chat_template=SMOLVLM_TEMPLATE)
    messages = [{"role": "system", "content": "Be brief."}] + ask("Describe the image.", [images[1]])
    with cactus.Model(str(mine)) as model:
        prompt = model.render_prompt(messages)
        assert prompt == ("<|im_start|>System: Be brief.<end_of_utterance>\n"
                          "User: <__media__>Describe the image.<end_of_utterance>\nAssistant:"), prompt
        assert "Describe the image." in model.render_prompt([{"role": "user", "content": "Describe the image."}])
        r = model.complete(messages, GREEDY)
    n_past, _, text, confidence = mtmd_oracle.mtmd_prompt_greedy(str(mine / "text.gguf"), str(mine / "mmproj.gguf"),
                                                                 prompt, [rgbs[1]])
    assert r["prompt_tokens"] == n_past and r["response"] == text.strip()
    assert abs(r["confidence"] - confidence) < 5e-4, (r["confidence"], confidence)


def test_image_embedding_is_the_mean_of_libmtmds_image_rows(pair):
    """cactus_image_embed = the mean of the projected rows the prompt would hold (every tile), unit
    length: the same rows libmtmd computes for the image."""
    import ctypes

    import numpy as np
    from mtmd_oracle import mtmd_layout

    folder, images, rgbs = pair
    lib = ctypes.CDLL(LIBRARY)
    lib.cactus_init.restype = ctypes.c_void_p
    lib.cactus_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool]
    lib.cactus_image_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float),
                                       ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    lib.cactus_destroy.argtypes = [ctypes.c_void_p]
    lib.cactus_get_last_error.restype = ctypes.c_char_p
    handle = lib.cactus_init(folder.encode(), None, False)
    assert handle, lib.cactus_get_last_error()
    try:
        for path, rgb in zip(images[:2], rgbs[:2]):
            buf = (ctypes.c_float * 4096)()
            dim = ctypes.c_size_t(0)
            rc = lib.cactus_image_embed(handle, path.encode(), buf, ctypes.sizeof(buf), ctypes.byref(dim))
            assert rc > 0, lib.cactus_get_last_error()
            ours = np.array(buf[:rc], dtype=np.float64)
            rows = [c[1] for c in mtmd_layout(os.path.join(folder, "text.gguf"), os.path.join(folder, "mmproj.gguf"),
                                              rgb) if c[0] == "image"]
            ref = np.concatenate(rows).astype(np.float64).mean(axis=0)
            ref /= np.linalg.norm(ref)
            assert abs(np.linalg.norm(ours) - 1.0) < 1e-5
            assert float(ours @ ref) > 0.9999, float(ours @ ref)
        small = (ctypes.c_float * 2)()
        assert lib.cactus_image_embed(handle, images[0].encode(), small, ctypes.sizeof(small),
                                      ctypes.byref(dim)) == -2
        assert dim.value == rc
    finally:
        lib.cactus_destroy(handle)
