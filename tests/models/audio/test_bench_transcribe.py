"""cactus bench --transcribe: numbers for a Whisper model, a clean skip for a text model."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import speech_set  # noqa: E402
from test_whisper_oracle import CACTUS, gguf_path  # noqa: E402

MODELS_DIR = os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models"))


def bench(*args):
    out = subprocess.run([CACTUS, "bench", "--transcribe", "--json", "-r", "1"] + list(args), check=True,
                         capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout)


def test_text_model_is_skipped_not_aborted():
    r = bench(os.path.join(MODELS_DIR, "smollm2-135m.gguf"))
    assert r["skipped"] == "no audio encoder"


def test_whisper_reports_rates():
    (wav, _), = speech_set.ensure_clips([45])
    r = bench(gguf_path("whisper-tiny.en"), "--audio", wav, "-t", "2")
    run, = r["runs"]
    assert r["audio_seconds"] > 1
    assert run["threads"] == 2
    assert run["rtf"] > 0 and run["encoder_ms_per_window"] > 0
    assert run["decode_tokens"] > 3 and run["decode_tps"] > 0
    beam = bench(gguf_path("whisper-tiny.en"), "--audio", wav, "-t", "2", "--beam-size", "5")
    assert beam["beam_size"] == 5 and r["beam_size"] == 1
    assert beam["runs"][0]["decode_tokens"] > run["decode_tokens"]  # every beam's tokens count
