"""Model.embed / image_embed / audio_embed / search over the C API (cactus_embed, cactus_image_embed,
cactus_audio_embed, cactus_rag_query): shapes, normalisation, agreement with `cactus embed`, errors,
and a corpus folder given to cactus_init."""
import json
import math
import os
import subprocess
import sys

import pytest

from cactus_test_paths import model_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "cactus")
TEXTS = ["The cat sat on the mat.", "Paris is the capital of France."]


def norm(v):
    return math.sqrt(sum(x * x for x in v))


@pytest.fixture(scope="module")
def smol():
    import cactus
    m = cactus.Model(model_path("smollm2-135m"))
    yield m
    m.close()


def test_embed_text_list_and_normalize(smol):
    one = smol.embed(TEXTS[1])
    assert isinstance(one, list) and len(one) == 576 and abs(norm(one) - 1) < 1e-4
    both = smol.embed(TEXTS)
    assert len(both) == 2 and max(abs(a - b) for a, b in zip(both[1], one)) < 1e-5
    raw = smol.embed(TEXTS[1], normalize=False)
    assert abs(norm(raw) - 1) > 1e-3
    assert max(abs(a / norm(raw) - b) for a, b in zip(raw, one)) < 1e-4


def test_embed_equals_the_cli(smol):
    proc = subprocess.run([BIN, "embed", "-m", model_path("smollm2-135m"), "-t", "2", *TEXTS], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cli = [json.loads(line)["embedding"] for line in proc.stdout.splitlines()]
    for text, vector in zip(TEXTS, cli):
        assert max(abs(a - b) for a, b in zip(smol.embed(text), vector)) < 1e-5


def test_encoder_handle_equals_the_cli():
    import cactus
    path = os.path.join(os.path.dirname(model_path("smollm2-135m")), "all-minilm-l6-v2.gguf")
    if not os.path.exists(path):
        pytest.skip("needs all-minilm-l6-v2 (cactus pull all-minilm-l6-v2)")
    proc = subprocess.run([BIN, "embed", "-m", path, "-t", "2", *TEXTS], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cli = [json.loads(line)["embedding"] for line in proc.stdout.splitlines()]
    with cactus.Model(path) as m:
        vectors = m.embed(TEXTS)
    assert len(vectors[0]) == 384
    for a, b in zip(vectors, cli):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5


def test_embed_errors(smol):
    import cactus
    with pytest.raises(cactus.CactusError):
        smol.embed("")
    with pytest.raises(RuntimeError):
        smol.search("anything")  # no corpus on this handle
    with pytest.raises(cactus.CactusError):
        smol.image_embed(os.path.join(ROOT, "README.md"))  # no vision encoder
    with pytest.raises(cactus.CactusError):
        smol.audio_embed("/nonexistent.wav")
    assert len(smol.embed(TEXTS[0])) == 576  # the handle still works


def test_search_over_a_corpus(tmp_path):
    import cactus
    (tmp_path / "cats.md").write_text("# Cats\n\nCats are small furry animals that purr and chase mice.\n" * 3)
    (tmp_path / "paris.txt").write_text("Paris is the capital of France, on the Seine, home of the Eiffel Tower.\n")
    with cactus.Model(model_path("smollm2-135m"), corpus_dir=tmp_path) as m:
        chunks = m.search("What is the capital of France?", top_k=5)
        assert chunks and {c["source"] for c in chunks} <= {"cats.md", "paris.txt"}
        assert all(c["content"] and c["score"] > 0 for c in chunks)
        if os.path.exists(os.path.join(os.path.dirname(model_path("smollm2-135m")), "all-minilm-l6-v2.gguf")):
            assert chunks[0]["source"] == "paris.txt"  # MiniLM (the pulled RAG embedder) ranks it first
        assert len(m.search("cats", top_k=1)) == 1
        with pytest.raises(RuntimeError):
            m.search("")
    with cactus.Model(model_path("smollm2-135m"), corpus_dir=str(tmp_path), cache_index=True) as m:
        again = m.search("What is the capital of France?", top_k=5)  # from the stored index
        assert [c["content"] for c in again] == [c["content"] for c in chunks]


def test_audio_embed_whisper():
    import cactus
    sys.path.insert(0, os.path.join(ROOT, "tests", "models", "audio"))
    import speech_set
    (path, _), = speech_set.ensure_clips([40])
    with cactus.Model(model_path("whisper-tiny.en")) as w:
        a = w.audio_embed(path)
        assert len(a) == 384 and abs(norm(a) - 1) < 1e-4
        assert max(abs(x - y) for x, y in zip(w.audio_embed(path), a)) < 1e-6


def test_image_embed_with_a_projector(tmp_path):
    import cactus
    sys.path.insert(0, os.path.join(ROOT, "tests", "models", "vision"))
    import make_vlm_gguf as mk
    import vision_images
    mk.write_idefics3_mmproj(str(tmp_path / "mmproj.gguf"), mk.IDEFICS3_SMALL, seed=5)
    mk.write_llama_text(str(tmp_path / "text.gguf"), mk.IDEFICS3_SMALL["proj_dim"], mk.IDEFICS3_SPECIALS)
    pngs = []
    for i, (w, h) in enumerate([(300, 200), (97, 389)]):
        pngs.append(str(tmp_path / ("img%d.png" % i)))
        vision_images.write_png(pngs[-1], vision_images.image(w, h, i))
    with cactus.Model(str(tmp_path)) as m:
        a, b = m.image_embed(pngs[0]), m.image_embed(pngs[1])
        assert len(a) == mk.IDEFICS3_SMALL["proj_dim"] and abs(norm(a) - 1) < 1e-4
        assert max(abs(x - y) for x, y in zip(a, b)) > 1e-3
        assert max(abs(x - y) for x, y in zip(m.image_embed(pngs[0]), a)) < 1e-6
