"""`cactus bench MODEL --mmproj MMPROJ [--image FILE]` on the random-weight SmolVLM pair of
make_vlm_gguf.py (small widths: a few seconds):

  * the JSON holds per thread count the image encode ms (median <= max, min <= median, all > 0), the
    image's rows and layout tokens, the image prefill (its prompt holds the layout) and TTFT = encode
    + prefill; the generated 640x480 image (2x2 tiles + global) gives more rows than a 97x389 PNG
    (1x2 tiles + global) given with --image;
  * an mmproj whose rows do not fit the model (SmolVLM mmproj, smollm2 text), a missing mmproj path
    and a corrupt image each fail with an error naming the problem;
  * --image without any mmproj (a .gguf path, nothing in $CACTUS_MMPROJ) is reported as skipped;
  * each row names the encoder's device; --device with an unknown device fails naming it.
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLI = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "cactus")
MODELS = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))
SMOLLM = os.path.join(MODELS, "smollm2-135m.gguf")
sys.path.insert(0, HERE)

import make_vlm_gguf as mk  # noqa: E402
import vision_images  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(CLI), reason="bin/cactus not built")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("vision_bench")
    mmproj, text = str(d / "mmproj.gguf"), str(d / "text.gguf")
    mk.write_idefics3_mmproj(mmproj, mk.IDEFICS3_SMALL, seed=5)
    mk.write_llama_text(text, mk.IDEFICS3_SMALL["proj_dim"], mk.IDEFICS3_SPECIALS)
    png = str(d / "tall.png")
    vision_images.write_png(png, vision_images.image(97, 389, 2))
    return text, mmproj, png, d


def bench(*args):
    env = dict(os.environ)
    env.pop("CACTUS_MMPROJ", None)
    return subprocess.run([CLI, "bench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300, env=env)


def check_results(doc, threads):
    results = doc["vision"]["results"]
    assert [r["threads"] for r in results] == threads
    for r in results:
        assert r["device"] == "cpu"  # the encoder ran where the model did (--device, else $CACTUS_DEVICE, else cpu)
        for key in ("encode_ms", "ttft_ms"):
            s = r[key]
            assert 0 < s["min"] <= s["median"] <= s["max"], (key, s)
        pre = r["prefill"]
        assert 0 < pre["ms"]["min"] <= pre["ms"]["median"] <= pre["ms"]["max"]
        assert pre["tokens_per_second"] > 0
        assert 0 < r["image_tokens"] < r["layout_tokens"] < pre["prompt_tokens"]
        # TTFT of each repetition is its encode plus its prefill.
        assert r["ttft_ms"]["min"] >= r["encode_ms"]["min"] + pre["ms"]["min"] - 1e-6
    return results


def test_unknown_device_is_refused_naming_it(pair):
    text, mmproj, _, _ = pair
    proc = bench(text, "--mmproj", mmproj, "-r", "1", "-t", "1", "--device", "tpu:3", "--json")
    assert proc.returncode != 0
    assert "'tpu:3'" in proc.stderr, proc.stderr


def test_encode_json_generated_and_given_image(pair):
    text, mmproj, png, _ = pair
    proc = bench(text, "--mmproj", mmproj, "-r", "2", "-t", "1,2", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["mmproj"] == mmproj and doc["image"].startswith("<generated") and doc["reps"] == 2
    generated = check_results(doc, [1, 2])
    proc = bench(text, "--mmproj", mmproj, "--image", png, "-r", "1", "-t", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["image"] == png
    given = check_results(doc, [1])
    # 640x480: 2x2 tiles + global; 97x389: 1x2 tiles + global (the same rows per tile).
    assert generated[0]["image_tokens"] * 3 == given[0]["image_tokens"] * 5


def test_table_output(pair):
    text, mmproj, _, _ = pair
    proc = bench(text, "--mmproj", mmproj, "-r", "1", "-t", "1")
    assert proc.returncode == 0, proc.stderr
    assert "encode ms" in proc.stdout and "TTFT" in proc.stdout


def test_errors_name_the_problem(pair, tmp_path):
    text, mmproj, _, _ = pair
    assert os.path.isfile(SMOLLM), "missing model %s" % SMOLLM
    proc = bench(SMOLLM, "--mmproj", mmproj, "-r", "1", "-t", "1", "--json")
    assert proc.returncode != 0
    assert "not a pair" in proc.stderr and mmproj in proc.stderr, proc.stderr
    missing = str(tmp_path / "nope-mmproj.gguf")
    proc = bench(text, "--mmproj", missing, "-r", "1", "-t", "1", "--json")
    assert proc.returncode != 0
    assert missing in proc.stderr and "does not exist" in proc.stderr, proc.stderr
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    proc = bench(text, "--mmproj", mmproj, "--image", str(bad), "-r", "1", "-t", "1", "--json")
    assert proc.returncode != 0
    assert str(bad) in proc.stderr, proc.stderr


def test_image_without_mmproj_is_skipped(pair):
    text, _, png, _ = pair
    proc = bench(text, "--image", png, "-r", "1", "-t", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert "no vision projector" in doc["vision"]["skipped"]
