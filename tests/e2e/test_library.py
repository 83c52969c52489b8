"""The shipped library as users meet it: exported symbols, a C program written only against the
public header, and `pip install ./python` from the checkout."""
import os
import re
import subprocess
import sys
import venv

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))
LIBRARY = os.path.join(BUILD_DIR, "lib", "libcactus.so")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))

API = {"cactus_init", "cactus_destroy", "cactus_reset", "cactus_stop", "cactus_set_backend",
       "cactus_complete", "cactus_prefill", "cactus_tokenize", "cactus_render_prompt",
       "cactus_get_last_error", "cactus_log_set_level", "cactus_log_set_callback",
       # speech (Whisper handles): cactus_transcribe and the streaming trio, as Cactus names them
       "cactus_transcribe", "cactus_stream_transcribe_start", "cactus_stream_transcribe_process",
       "cactus_stream_transcribe_stop",
       # embeddings and retrieval, as Cactus names them
       "cactus_embed", "cactus_image_embed", "cactus_audio_embed", "cactus_rag_query"}


def test_library_exports_only_the_c_api():
    out = subprocess.run(["nm", "-D", "--defined-only", LIBRARY], check=True, capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert exported == API


def test_public_header_is_plain_c():
    header = os.path.join(REPO, "include", "cactus", "cactus.h")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-pedantic", "-fsyntax-only", "-x", "c", header],
                   check=True)


def test_c_program_three_turn_chat_reuses_the_cache():
    model = os.path.join(MODELS, "gemma3-270m.gguf")
    assert os.path.exists(model), model
    run = subprocess.run([os.path.join(BUILD_DIR, "bin", "example_chat"), model], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    turns = re.findall(r"turn (\d): prefill_tokens=(\d+) decode_tokens=(\d+) streamed_pieces=(\d+)", run.stdout)
    assert len(turns) == 3, run.stdout
    prefill = [int(t[1]) for t in turns]
    assert all(int(t[3]) > 0 for t in turns), "every turn streamed"
    # Turn 1 computes the whole prompt; turns 2 and 3 only the reply's tail and the new question.
    assert prefill[0] > 10
    assert prefill[1] < prefill[0] and prefill[2] < prefill[0] + 20


def test_pip_install_from_checkout(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    env = dict(os.environ, CACTUS_LIBRARY=LIBRARY)
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    os.path.join(REPO, "python")], check=True, env=env)
    code = ("import cactus, json, sys\n"
            "m = cactus.Model(sys.argv[1])\n"
            "text = ''.join(m.chat([{'role': 'user', 'content': 'Say hi.'}], options={'max_tokens': 8}))\n"
            "assert text and m.last_response['success']\n"
            "print('ok', cactus.__file__)\n")
    clean_env = {k: v for k, v in os.environ.items() if k != "CACTUS_LIBRARY"}
    out = subprocess.run([python, "-c", code, os.path.join(MODELS, "smollm2-135m.gguf")], capture_output=True,
                         text=True, cwd=str(tmp_path), env=clean_env)
    assert out.returncode == 0, out.stderr
    assert "site-packages" in out.stdout  # the installed package (with its bundled library) was used
