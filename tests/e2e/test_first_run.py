"""A newcomer's first run: the README's quick-start command answers its own question right.

The quick start runs `scripts/run.sh -p "What is the capital of France?"`: setup, `cactus pull` of the
script's default model, then `cactus run MODEL -p PROMPT`. Here the same model, prompt and (default)
settings go through build/bin/cactus with no model named, so the CLI's own default is what answers;
the README block, the script's default and `cactus list`'s mark are checked to agree, so none can
drift from what this test runs. The model is chosen on bench/first_run.py's pass rates.
"""
import os
import re
import shlex
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "cactus")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
QUICK_START = 'scripts/run.sh -p "What is the capital of France?"'


def quick_start_block():
    """The first ```sh block of README.md's "## Quick start" section, as lines."""
    readme = open(os.path.join(REPO, "README.md")).read()
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "README.md's Quick start has no ```sh block"
    return block.group(1).splitlines()


def run_sh_default_model():
    script = open(os.path.join(REPO, "scripts", "run.sh")).read()
    assert 'exec build/bin/cactus run "$model" "$@"' in script  # what this test runs after the pull
    return re.search(r"^model=(\S+)$", script, re.MULTILINE).group(1)


def list_default_model():
    out = subprocess.run([BIN, "list"], check=True, stdout=subprocess.PIPE, text=True).stdout
    marked = [line.split()[0] for line in out.splitlines() if line.endswith(" — default")]
    assert len(marked) == 1, out
    return marked[0]


def test_readme_quick_start_runs_the_command_this_test_runs():
    commands = [line.split("#", 1)[0].strip() for line in quick_start_block()]
    assert QUICK_START in commands, commands


def test_the_script_pulls_the_model_the_cli_defaults_to():
    assert run_sh_default_model() == list_default_model()


def test_the_quick_start_answers_paris():
    model = list_default_model()
    path = os.path.join(MODELS, model + ".gguf")
    assert os.path.isfile(path), "missing %s: build/bin/cactus pull %s" % (path, model)
    prompt = shlex.split(QUICK_START)[2]
    proc = subprocess.run([BIN, "run", "-p", prompt], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"\bParis\b", proc.stdout), proc.stdout
