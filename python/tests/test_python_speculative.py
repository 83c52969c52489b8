"""Speculative decoding from Python: Model(draft_model=..., spec_type=..., draft_max=...) and the
same keys per call give the greedy reply of plain decoding, and the responses carry the draft
counters; bad values raise CactusError naming the option."""
import pytest

import cactus
from cactus_test_paths import model_path

EDIT = [{"role": "user", "content": "Add a docstring to this function and return only the code:\n"
                                    "```python\ndef area(width, height):\n    return width * height\n```"}]
GREEDY = {"temperature": 0, "max_tokens": 40}


@pytest.fixture(scope="module")
def plain_reply():
    with cactus.Model(model_path("qwen2.5-coder-0.5b")) as model:
        r = model.complete(EDIT, GREEDY)
    assert "draft_tokens" not in r
    return r


def check_speculative(r, plain):
    assert r["response"] == plain["response"]
    assert r["decode_tokens"] == plain["decode_tokens"]
    assert 0 < r["draft_accepted"] <= r["draft_tokens"], r
    assert 0 < r["decode_steps"] < r["decode_tokens"], r


def test_model_with_a_draft_model_gives_the_plain_reply(plain_reply):
    with cactus.Model(model_path("qwen2.5-coder-0.5b"), draft_model="qwen2.5-coder-0.5b", draft_max=8) as model:
        check_speculative(model.complete(EDIT, GREEDY), plain_reply)
        model.reset()
        # per-call options override the model's: prompt lookup alone, then plain decoding
        check_speculative(model.complete(EDIT, dict(GREEDY, spec_type="ngram")), plain_reply)
        model.reset()
        r = model.complete(EDIT, dict(GREEDY, spec_type="off"))
        assert r["response"] == plain_reply["response"] and "draft_tokens" not in r


def test_streamed_chat_with_prompt_lookup(plain_reply):
    with cactus.Model(model_path("qwen2.5-coder-0.5b"), spec_type="ngram", **GREEDY) as model:
        assert "".join(model.chat(EDIT)).strip() == plain_reply["response"].strip()
        assert model.last_response["draft_tokens"] > 0


def test_bad_values_raise_naming_the_option():
    with cactus.Model(model_path("qwen2.5-coder-0.5b")) as model:
        with pytest.raises(cactus.CactusError, match="draft_max"):
            model.complete(EDIT, {"max_tokens": 2, "draft_max": 0})
        with pytest.raises(cactus.CactusError, match="unknown spec_type 'bogus'"):
            model.complete(EDIT, {"max_tokens": 2, "spec_type": "bogus"})
        with pytest.raises(cactus.CactusError, match="draft_model"):
            model.complete(EDIT, {"max_tokens": 2, "draft_model": model_path("smollm2-135m")})
        assert model.complete(EDIT, {"max_tokens": 2})["success"]
