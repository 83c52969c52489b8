"""`cactus serve` started exactly as llama-server is started: its flags (short, long, `--flag=V`)
and its LLAMA_ARG_* variables are used, ignored with a notice, or refused with a reason (exit 2);
an unknown flag is explained; /health answers 503 "Loading model" until the model is loaded."""
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from serverproc import BIN, MODEL, REPO, ServerProcess, free_port

QWEN = os.path.expanduser("~/.cache/cactus/models/qwen2.5-coder-0.5b.gguf")
HI = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0}


class LlamaStyleServer(ServerProcess):
    """A server started with a llama-server command line (no cactus flags added)."""

    def __init__(self, args, env=None, port=None):
        self.port = port or free_port()
        self.scheme = "http"
        self.ca = None
        self.url = "http://127.0.0.1:%d" % self.port
        self.log_path = "/tmp/cactus-llama-flags-%d.log" % self.port
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_")}
        full_env.update(env or {})
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([BIN, "serve", *args], stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self.wait_ready()

    def output(self):
        return open(self.log_path).read()


def run_serve(args, env=None, timeout=60):
    """`cactus serve ARGS` that is expected to exit by itself: (status, stderr)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_")}
    full_env.update(env or {})
    p = subprocess.run([BIN, "serve", *args], env=full_env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text("# llama-server's format: one key per line\n\nfirst-key\n  second-key  \n")
    return str(path)


@pytest.fixture(scope="module")
def llama_cli(key_file):
    """llama-server's usual command line, with variables the command line must win over."""
    port = free_port()
    args = ["-m", MODEL, "--host", "127.0.0.1", "--port=%d" % port, "--temp", "0.8", "--seed", "42", "-n", "64",
            "-b", "32", "-ub", "16", "--no-ui", "--jinja", "-fa", "on", "-ngl", "99", "-ctk", "f16", "-ctv", "f16",
            "--metrics", "--slots", "-np", "2", "--ctx_size", "2048", "-t", "2", "--threads-http", "8", "-cb",
            "--offline", "-a", "from-cli", "--api-key-file", key_file, "--chat-template", "chatml",
            "--reasoning-format", "deepseek", "--chat-template-kwargs", '{"enable_thinking": false}', "-to", "600",
            "--cache-reuse", "256", "--log-disable", "--max_queue=8"]
    s = LlamaStyleServer(args, env={"LLAMA_ARG_ALIAS": "from-env", "LLAMA_ARG_N_PARALLEL": "3"}, port=port)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def llama_env():
    """The same kind of settings given only through llama-server's variables."""
    port = free_port()
    env = {"LLAMA_ARG_MODEL": MODEL, "LLAMA_ARG_HOST": "127.0.0.1", "LLAMA_ARG_PORT": str(port),
           "LLAMA_ARG_CTX_SIZE": "3072", "LLAMA_ARG_N_PARALLEL": "3", "LLAMA_ARG_THREADS": "2",
           "LLAMA_API_KEY": "k1,k2", "LLAMA_ARG_ALIAS": "env-alias", "LLAMA_ARG_ENDPOINT_METRICS": "1",
           "LLAMA_ARG_N_PREDICT": "5", "LLAMA_ARG_BATCH": "64", "LLAMA_ARG_UBATCH": "32",
           "LLAMA_ARG_FLASH_ATTN": "on", "LLAMA_ARG_N_GPU_LAYERS": "99", "LLAMA_ARG_CACHE_TYPE_K": "q8_0",
           "LLAMA_ARG_CACHE_TYPE_V": "q8_0", "LLAMA_ARG_JINJA": "true", "LLAMA_ARG_NO_UI": "1",
           "LLAMA_ARG_CHAT_TEMPLATE": "chatml", "LLAMA_ARG_ENDPOINT_SLOTS": "disabled",
           "LLAMA_ARG_TEMPERATURE": "0.5", "LLAMA_ARG_CONT_BATCHING": "1", "LLAMA_ARG_EMBEDDINGS": "1"}
    s = LlamaStyleServer([], env=env, port=port)
    yield s
    assert s.stop() == 0


def auth(key):
    return {"Authorization": "Bearer " + key}


def test_llama_command_line_serves(llama_cli):
    status, body, _ = llama_cli.get("/v1/models", headers=auth("second-key"))
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "from-cli"  # the command line wins over LLAMA_ARG_ALIAS
    health = json.loads(llama_cli.get("/health")[1])
    assert health["status"] == "ok" and health["slots_idle"] == 2  # -np 2 wins over LLAMA_ARG_N_PARALLEL=3
    props = json.loads(llama_cli.get("/props", headers=auth("first-key"))[1])
    assert props["default_generation_settings"]["n_ctx"] == 1024  # --ctx_size (llama.cpp reads '_' as '-') / -np
    assert props["chat_template"].startswith("{%- for message in messages")  # the built-in chatml
    assert llama_cli.get("/metrics", headers=auth("first-key"))[0] == 200


def test_api_key_file(llama_cli):
    assert llama_cli.get("/v1/models")[0] == 401
    assert llama_cli.get("/v1/models", headers=auth("wrong"))[0] == 401
    assert llama_cli.get("/v1/models", headers=auth("# llama-server's format: one key per line"))[0] == 401
    for key in ("first-key", "second-key"):
        assert llama_cli.get("/v1/models", headers=auth(key))[0] == 200
    assert llama_cli.get("/health")[0] == 200  # /health needs no key, as in llama-server


def test_ignored_flags_print_one_notice_each(llama_cli):
    out = llama_cli.output()
    for shown in ("--no-ui", "-fa on", "-ngl 99", "-cb", "--offline", "--cache-reuse 256"):
        lines = [line for line in out.splitlines() if line.startswith("serve: ignoring " + shown + ":")]
        assert len(lines) == 1, (shown, out)
    assert "--jinja" not in out  # accepted silently: templates are always Jinja
    assert "POST /v1/models" not in out and "GET /health" not in out  # --log-disable: no request log


def test_chat_template_override_changes_the_prompt(llama_cli, server):
    status, body, _ = llama_cli.post("/v1/chat/completions", HI, headers=auth("first-key"))
    assert status == 200, body
    chatml = json.loads(body)["usage"]["prompt_tokens"]
    status, body, _ = server.post("/v1/chat/completions", HI)
    assert status == 200, body
    own = json.loads(body)["usage"]["prompt_tokens"]
    # SmolLM2's own template adds a default system prompt; ChatML renders only the user turn.
    assert chatml < own
    assert chatml == len(json.loads(llama_cli.post("/tokenize", {
        "content": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}, headers=auth("first-key"))[1])["tokens"])


def test_environment_alone_configures_the_server(llama_env):
    status, body, _ = llama_env.get("/v1/models", headers=auth("k2"))
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "env-alias"
    assert llama_env.get("/v1/models", headers=auth("k1"))[0] == 200
    assert llama_env.get("/v1/models")[0] == 401
    health = json.loads(llama_env.get("/health")[1])
    assert health["slots_idle"] == 3
    props = json.loads(llama_env.get("/props", headers=auth("k1"))[1])
    assert props["default_generation_settings"]["n_ctx"] == 1024
    assert props["chat_template"].startswith("{%- for message in messages")
    assert llama_env.get("/metrics", headers=auth("k1"))[0] == 200
    out = llama_env.output()
    for shown in ("LLAMA_ARG_N_GPU_LAYERS=99", "LLAMA_ARG_FLASH_ATTN=on", "LLAMA_ARG_NO_UI=1",
                  "LLAMA_ARG_CONT_BATCHING=1"):
        assert "serve: ignoring " + shown + ":" in out, (shown, out)
    # LLAMA_ARG_CACHE_TYPE_K/V=q8_0: the slots hold int8 rows and still answer.
    status, body, _ = llama_env.post("/v1/chat/completions", HI, headers=auth("k1"))
    assert status == 200, body


def test_request_defaults_follow_the_flags(llama_env):
    body = {"messages": [{"role": "user", "content": "Count from one to fifty."}], "temperature": 0}
    status, reply, _ = llama_env.post("/v1/chat/completions", body, headers=auth("k1"))
    assert status == 200
    assert json.loads(reply)["usage"]["completion_tokens"] <= 5  # LLAMA_ARG_N_PREDICT=5
    props = json.loads(llama_env.get("/props", headers=auth("k1"))[1])
    assert props["default_generation_settings"]["params"]["temperature"] == pytest.approx(0.5)


@pytest.mark.parametrize("args,env,says", [
    (["--no-such-flag"], {}, "unknown flag '--no-such-flag': see 'cactus serve --help'"),
    (["--no-such-flag=3"], {}, "unknown flag '--no-such-flag'"),
    (["-hf", "ggml-org/gemma-3-1b-it-GGUF"], {}, "-hf ggml-org/gemma-3-1b-it-GGUF is not supported: models are not"),
    ([], {"LLAMA_ARG_HF_REPO": "ggml-org/x"}, "LLAMA_ARG_HF_REPO=ggml-org/x is not supported"),
    (["--lora", "a.gguf"], {}, "LoRA adapters"),
    (["--model-url", "http://x/y.gguf"], {}, "not supported"),
    (["-ctk", "q4_0", "-ctv", "q4_0"], {}, "the cache types are f16, f32 and q8_0"),
    (["-ctk", "q8_0"], {}, "the K and V caches share one type"),
    (["--chat-template", "no-such-template"], {}, "chatml, gemma"),
    (["--chat-template-kwargs", "{not json"], {}, "--chat-template-kwargs: invalid JSON"),
    (["--chat-template-kwargs", "[1]"], {}, "must be a JSON object"),
    (["--reasoning-format", "deepseek-legacy"], {}, "deepseek-legacy is not supported"),
    (["--temp", "-1"], {}, "outside [0, 100]"),
    (["--top-p", "1.5"], {}, "outside [0, 1]"),
    (["--samplers", "top_k;bogus"], {}, "unknown sampler 'bogus'"),
    (["-b", "1", "-np", "2"], {}, "every decoding slot needs a token per step"),
    (["--port"], {}, "flag '--port' needs a value"),
    ([MODEL], {}, "unexpected " + MODEL + ": see 'cactus serve --help'"),
    ([], {"LLAMA_ARG_ENDPOINT_SLOTS": "maybe"}, "LLAMA_ARG_ENDPOINT_SLOTS='maybe' is not a boolean"),
    (["--api-key-file", "/nonexistent/keys"], {}, "--api-key-file: cannot read"),
    (["--spec-type", "draft-eagle3"], {}, "--spec-type: spec_type 'draft-eagle3' needs a drafter this engine does not"),
    (["--spec-type", "draft-mtp,ngram-simple"], {}, "'draft-mtp' needs a drafter this engine does not have"),
    ([], {"LLAMA_ARG_SPEC_TYPE": "bogus"}, "unknown spec_type 'bogus'"),
    (["--spec-type", "draft"], {}, "needs a draft model: give --model-draft"),
    (["--spec-type", "ngram", "-md", MODEL], {}, "--model-draft needs --spec-type draft"),
    (["--spec-draft-n-min", "8", "--spec-draft-n-max", "4"], {}, "--draft-min 8 is above --draft-max 4"),
    (["--spec-type", "ngram", "--engine-per-slot"], {}, "--engine-per-slot decodes without speculation"),
    (["--spec-draft-hf", "ggml-org/x"], {}, "--spec-draft-hf ggml-org/x is not supported: models are not downloaded"),
])
def test_bad_command_lines_exit_2_with_one_reason(args, env, says):
    status, err = run_serve([MODEL, "--port", str(free_port()), *args], env)
    assert status == 2, err
    assert says in err, err
    assert "The following arguments were not expected" not in err


def test_a_bad_model_file_still_fails_the_start(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    status, err = run_serve([str(bad), "--port", str(free_port())])
    assert status not in (0, 2)
    assert "broken.gguf" in err, err
    # A projector that fails to load fails after the port is bound: the listener stops, the start fails.
    status, err = run_serve([MODEL, "--port", str(free_port()), "--mmproj", str(bad)], timeout=60)
    assert status == 1 and "broken.gguf" in err, err


def test_health_answers_503_while_loading():
    """The port is bound before the model loads; polled from the start, /health is either the
    503 "Loading model" of llama-server (its exact shape) or, once loaded, 200."""
    model = QWEN if os.path.isfile(QWEN) else MODEL
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_")}
    proc = subprocess.Popen([BIN, "serve", "-m", model, "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    seen = {}
    try:
        deadline = time.time() + 60
        while time.time() < deadline and 200 not in seen:
            for path in ("/health", "/v1/models"):
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
                        seen.setdefault(r.status, (path, r.read()))
                except urllib.error.HTTPError as e:
                    seen.setdefault(e.code, (path, e.read()))
                except OSError:
                    pass
            time.sleep(0.002)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert 200 in seen
    assert set(seen) <= {200, 503}, seen
    if 503 in seen:
        assert json.loads(seen[503][1]) == {
            "error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}


def table_rows():
    """(spellings, takes, does) of tools/server/llama_flags.cpp's table, as the docs script reads it."""
    import re
    src = open(os.path.join(REPO, "tools", "server", "llama_flags.cpp")).read()
    row = re.compile(r'\{"([^"]*)", "([^"]*)", (?:nullptr|"[^"]*"), Takes::(\w+), Does::(\w+),')
    return [(names.split(",") + [n for n in negations.split(",") if n], takes, does)
            for names, negations, takes, does in row.findall(src)]


# A valid value for the used flags whose values are checked before --help is read.
SAMPLE = {"--pooling": "mean", "--reasoning-format": "none", "-rea": "on", "--reasoning": "on", "-m": MODEL,
          "--model": MODEL, "--spec-type": "ngram", "--spec-draft-model": MODEL, "-md": MODEL, "--model-draft": MODEL}


def test_every_flag_of_the_table_is_used_ignored_or_refused():
    rows = table_rows()
    assert len(rows) > 240  # llama-server's whole list, not a sample
    for spellings, takes, does in rows:
        for flag in spellings:
            if flag in ("-h", "--help", "--usage"):
                continue
            values = {"Value": [SAMPLE.get(flag, "1")], "TwoValues": ["1", "2"]}.get(takes, [])
            status, err = run_serve([flag, *values, "--help"], timeout=30)
            if does == "Refuse":
                assert status == 2 and "is not supported: " in err, (flag, err)
            else:
                assert status == 0, (flag, err)  # used: our option exists; ignored: dropped
                assert ("serve: ignoring " + flag in err) == (does == "Ignore"), (flag, err)


def test_sigterm_while_loading_exits_cleanly():
    """A SIGTERM that comes while the model loads (the port already bound) stops the server once
    the load ends, with status 0."""
    import signal
    import socket
    model = QWEN if os.path.isfile(QWEN) else MODEL
    port = free_port()
    proc = subprocess.Popen([BIN, "serve", "-m", model, "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.002)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_device_takes_ours_and_llama_servers_spellings_and_refuses_the_rest():
    """--device (llama-server's -dev, LLAMA_ARG_DEVICE) picks the one device the model runs on:
    ours (cpu, cuda, cuda:N) or llama-server's (none, CUDA0); a list of devices or an unknown name
    stops the start with status 2 before the model loads."""
    for args, env in ((["--device", "tpu:1"], None), (["-dev", "CUDA0,CUDA1"], None),
                      ([], {"LLAMA_ARG_DEVICE": "vulkan0"})):
        status, err = run_serve(["-m", MODEL, "--port", "0", *args], env=env, timeout=60)
        assert status == 2 and "--device" in err, (args, env, err)
    status, err = run_serve(["-m", MODEL, "-dev", "none", "--help"])
    assert status == 0 and "serve: ignoring -dev" not in err, err
