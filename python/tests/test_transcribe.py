"""Model.transcribe and the streaming trio over the C API, on whisper-tiny.en and espeak-ng speech."""
import os
import struct
import subprocess
import sys
import wave

import pytest

from cactus_test_paths import model_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "models", "audio"))
import speech_set  # noqa: E402


@pytest.fixture(scope="module")
def whisper():
    import cactus
    m = cactus.Model(model_path("whisper-tiny.en"))
    yield m
    m.close()


def pcm_of(path):
    with wave.open(path) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return w.readframes(w.getnframes())


@pytest.fixture(scope="module")
def clip():
    (path, sentence), = speech_set.ensure_clips([40])
    return path, sentence


def test_path_pcm_and_floats_agree(whisper, clip):
    path, sentence = clip
    by_path = whisper.transcribe(path, options={"temperature": 0})
    pcm = pcm_of(path)
    by_pcm = whisper.transcribe(pcm, options={"temperature": 0})
    samples = [s / 32768.0 for s in struct.unpack("<%dh" % (len(pcm) // 2), pcm)]
    by_floats = whisper.transcribe(samples, options={"temperature": 0})
    assert by_path["success"] and by_path["segments"], by_path
    assert by_path["response"] == by_pcm["response"]
    assert speech_set.words(by_floats["response"]) == speech_set.words(by_pcm["response"])
    assert speech_set.wer([sentence], [by_path["response"]]) < 0.5, by_path["response"]
    assert by_path["real_time_factor"] > 0 and by_path["audio_seconds"] > 1


def test_streaming_confirms_monotonically_and_ends_like_one_shot(whisper, clip):
    path, _ = clip
    pcm = pcm_of(path)
    one_shot = whisper.transcribe(pcm, options={"temperature": 0})["response"]
    pieces = [pcm[i:i + 7001 * 2] for i in range(0, len(pcm), 7001 * 2)]  # odd-sized pieces
    confirmed = ""
    last = None
    for r in whisper.transcribe_stream(pieces, options={"temperature": 0}):
        assert r["success"], r
        assert r["confirmed"].startswith(confirmed), (confirmed, r["confirmed"])
        confirmed = r["confirmed"]
        last = r
    assert speech_set.words(last["response"]) == speech_set.words(one_shot)


def test_errors_are_clear(whisper, clip):
    import cactus
    with pytest.raises(cactus.CactusError, match="exactly one"):
        cactus.cactus_transcribe(whisper._handle)
    with pytest.raises(cactus.CactusError, match="unknown key"):
        whisper.transcribe(clip[0], options={"bogus": 1})
    with pytest.raises(cactus.CactusError, match="read audio"):
        whisper.transcribe(os.path.join(ROOT, "README.md"))
    with pytest.raises(cactus.CactusError, match="16-bit"):
        whisper.transcribe(b"\x00\x01\x02")
    with pytest.raises(cactus.CactusError, match="speech model"):
        cactus.cactus_tokenize(whisper._handle, "hello")


def test_beam_size_passes_through_and_bad_values_are_errors(whisper, clip):
    import cactus
    path, sentence = clip
    greedy = whisper.transcribe(path, options={"temperature": 0})
    beam = whisper.transcribe(path, options={"temperature": 0, "beam_size": 5, "patience": 1, "length_penalty": 1})
    assert beam["success"] and beam["segments"], beam
    assert speech_set.wer([sentence], [beam["response"]]) < 0.5, beam["response"]
    assert beam["decode_tokens"] > greedy["decode_tokens"]  # five beams decode more tokens
    for bad in [0, 17, 10**12, -1, 2.5, "5", True]:
        with pytest.raises(cactus.CactusError, match="beam_size"):
            whisper.transcribe(path, options={"beam_size": bad})
    for key, bad in [("patience", 0), ("patience", -1), ("length_penalty", -0.5), ("patience", "x")]:
        with pytest.raises(cactus.CactusError, match=key):
            whisper.transcribe(path, options={key: bad})
    with pytest.raises(cactus.CactusError, match="beam_size"):
        whisper.transcribe_stream([b"\x00\x00"], options={"beam_size": 0}).__next__()


def test_text_model_has_no_audio_encoder(smollm, clip):
    import cactus
    with pytest.raises(cactus.CactusError, match="no audio encoder"):
        cactus.cactus_transcribe(smollm, audio_path=clip[0])


def test_without_timestamps_decodes_text_only(whisper, clip):
    import cactus
    path, sentence = clip
    plain = whisper.transcribe(path, options={"temperature": 0, "without_timestamps": True})
    assert plain["success"] and plain["segments"], plain
    assert speech_set.wer([sentence], [plain["response"]]) < 0.5, plain["response"]
    assert "<|" not in plain["response"]
    for seg in plain["segments"]:  # one segment per 30 s window, from its start
        assert abs(seg["start"] / 30 - round(seg["start"] / 30)) < 1e-9, plain["segments"]
    with pytest.raises(cactus.CactusError, match="without_timestamps"):
        whisper.transcribe(path, options={"without_timestamps": 1})
