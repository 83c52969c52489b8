"""cactus.Model() with no path loads the CLI's default model (the one `cactus list` marks) and
answers the README quick start's question right, as `cactus run` does (tests/e2e/test_first_run.py)."""
import inspect
import os
import subprocess
from pathlib import Path

import cactus
from cactus_test_paths import model_path

BIN = Path(os.environ.get("CACTUS_BUILD_DIR", Path(__file__).resolve().parents[2] / "build")) / "bin" / "cactus"


def test_model_defaults_to_the_cli_default_and_answers_paris():
    listing = subprocess.run([str(BIN), "list"], check=True, stdout=subprocess.PIPE, text=True).stdout
    marked = [line.split()[0] for line in listing.splitlines() if line.endswith(" — default")]
    assert [inspect.signature(cactus.Model).parameters["path"].default] == marked
    model_path(marked[0])  # pulled, else a clear message
    with cactus.Model() as m:  # the defaults a newcomer gets (greedy, docs/API.md)
        reply = "".join(m.chat([{"role": "user", "content": "What is the capital of France?"}]))
    assert "Paris" in reply, reply
