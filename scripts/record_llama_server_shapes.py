"""Records llama-server's answers to the drop-in request list (tests/server/llama_shapes.py) as
shapes in tests/server/data/llama_server_shapes.json: the oracle of tests/server/test_llama_dropin.py.
Run by hand after changing the list (llama-server is built once by bench/build_llama_tool.sh, from
the llama-cpp-python sdist our other oracles use; ~10 minutes on 2 cores):
    python3 scripts/record_llama_server_shapes.py [--model ~/.cache/cactus/models/smollm2-135m.gguf]"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "server"))
import llama_shapes  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, proc, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("llama-server exited with %s" % proc.returncode)
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("llama-server not ready")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/cactus/models/smollm2-135m.gguf"))
    ap.add_argument("--llama-server", default=None)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "server", "data", "llama_server_shapes.json"))
    args = ap.parse_args()
    server = args.llama_server or subprocess.run(
        ["bash", os.path.join(REPO, "bench", "build_llama_tool.sh"), "llama-server"], check=True,
        stdout=subprocess.PIPE, text=True).stdout.strip()
    port = free_port()
    env = dict(os.environ)
    env.update(llama_shapes.ENV)
    proc = subprocess.Popen([server, "-m", args.model, "--port", str(port), *llama_shapes.FLAGS],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        url = "http://127.0.0.1:%d" % port
        wait_ready(url, proc)
        shapes = llama_shapes.record(url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out = {"recorded_with": "llama-server from llama-cpp-python 0.3.36's sdist, model " + os.path.basename(args.model),
           "flags": llama_shapes.FLAGS, "env": llama_shapes.ENV, "answers": shapes}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, a in shapes.items():
        print("%-24s %d" % (name, a["status"]))


if __name__ == "__main__":
    main()
