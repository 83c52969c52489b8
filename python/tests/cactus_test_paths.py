"""Where the Python package tests find the real models (shared by conftest.py and the test files:
importing `conftest` by name is ambiguous when several test folders have one)."""
import os


def model_path(name):
    store = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
    path = os.path.join(store, name + ".gguf")
    assert os.path.exists(path), "model %s missing; run build/bin/cactus pull %s" % (path, name)
    return path
