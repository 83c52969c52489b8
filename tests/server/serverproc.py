"""Helpers of the `cactus serve` tests: a server process on 127.0.0.1 (a free port), stopped with
SIGTERM. Only loopback traffic; every wait is bounded. (A module of its own name, so test files
import it unambiguously; conftest.py holds the fixtures.)"""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "cactus")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
MODEL = os.path.join(MODELS, "smollm2-135m.gguf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, *args, env=None, scheme="http", ca=None, alias="smollm2-135m", model=None):
        model = model or MODEL
        assert os.path.isfile(model), "missing model %s (cactus pull smollm2-135m)" % model
        self.port = free_port()
        self.scheme = scheme
        self.url = "%s://127.0.0.1:%d" % (scheme, self.port)
        self.log_path = "/tmp/cactus-serve-test-%d.log" % self.port
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.log = open(self.log_path, "w")
        alias_args = ["--alias", alias] if alias is not None else []  # None: args or the environment name it
        self.proc = subprocess.Popen([BIN, "serve", model, "--port", str(self.port), *alias_args, *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self.ca = ca
        self.wait_ready()

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + open(self.log_path).read())
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("server not ready: " + open(self.log_path).read())

    def _open(self, req, timeout):
        import ssl
        ctx = ssl.create_default_context(cafile=self.ca) if self.scheme == "https" else None
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def get(self, path, headers=None, timeout=30):
        return self._open(urllib.request.Request(self.url + path, headers=headers or {}), timeout)

    def post(self, path, body, headers=None, timeout=120):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return self._open(urllib.request.Request(self.url + path, data=data, headers=h), timeout)

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        return self.proc.returncode


def metric(text, name):
    """The value of an unlabelled Prometheus sample."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


def make_certificate(directory):
    """A self-signed certificate for 127.0.0.1 (the hand-off tests' TLS endpoint): (cert, key) paths."""
    key, crt = os.path.join(str(directory), "key.pem"), os.path.join(str(directory), "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return crt, key


def completion_requests(server):
    """How many /v1/chat/completions requests the server answered with 200."""
    text = server.get("/metrics")[1].decode()
    line = 'cactus_requests_total{endpoint="/v1/chat/completions",status="200"} '
    return sum(int(l[len(line):]) for l in text.splitlines() if l.startswith(line))
