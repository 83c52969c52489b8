"""cactus_complete's cloud hand-off end to end: a `cactus serve` on 127.0.0.1 over HTTPS (a
certificate made for this test) stands in for the cloud (CACTUS_HANDOFF_URL/_CA/_MODEL). Forced
(confidence_threshold 1), by confidence (threshold just above / below the local confidence), the
fallback on a refused connection, and auto_handoff false."""
import sys
import time
from pathlib import Path

import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "server"))
import cactus  # noqa: E402
from serverproc import ServerProcess, completion_requests, free_port, make_certificate  # noqa: E402

ASK = [{"role": "system", "content": "You are a helpful assistant."},
       {"role": "user", "content": "What is the capital city of France?"}]
BASE = {"max_tokens": 8, "temperature": 0}


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    crt, key = make_certificate(tmp_path_factory.mktemp("tls"))
    s = ServerProcess("--ssl-cert-file", crt, "--ssl-key-file", key, "--quiet", scheme="https", ca=crt,
                      alias="cloud-model")
    yield s
    s.stop()


@pytest.fixture
def endpoint(cloud, monkeypatch):
    monkeypatch.setenv("CACTUS_HANDOFF_URL", cloud.url)
    monkeypatch.setenv("CACTUS_HANDOFF_CA", cloud.ca)
    monkeypatch.setenv("CACTUS_HANDOFF_MODEL", "big-model")
    return cloud


def cloud_answer(cloud):
    """What the endpoint says to the same conversation, asked directly."""
    import ssl

    import httpx
    client = openai.OpenAI(base_url=cloud.url + "/v1", api_key="none", max_retries=0, timeout=120,
                           http_client=httpx.Client(verify=ssl.create_default_context(cafile=cloud.ca)))
    r = client.chat.completions.create(model="big-model", messages=ASK, max_tokens=8, temperature=0)
    return r.choices[0].message.content


def complete(smollm, **options):
    pieces = []
    r = cactus.cactus_complete(smollm, ASK, dict(BASE, **options), callback=lambda t, _id: pieces.append(t))
    assert r["success"], r
    return r, "".join(pieces)


def wait_count(cloud, expected):
    deadline = time.time() + 5  # the server counts a request once its answer is written
    while completion_requests(cloud) < expected and time.time() < deadline:
        time.sleep(0.05)
    return completion_requests(cloud)


def test_threshold_one_forces_the_cloud(smollm, endpoint):
    before = completion_requests(endpoint)
    r, streamed = complete(smollm, confidence_threshold=1.0)
    assert wait_count(endpoint, before + 1) == before + 1
    assert r["cloud_handoff"] is True and "forces" in r["cloud_handoff_reason"]
    assert r["cloud_handoff_model"] == "big-model"  # CACTUS_HANDOFF_MODEL reached the endpoint
    assert r["response"] == cloud_answer(endpoint) and "Paris" in r["response"]
    assert streamed == ""  # the endpoint answered before any local token
    assert "cloud_handoff_error" not in r


def test_low_confidence_hands_off_after_the_local_tokens(smollm, endpoint):
    local, local_streamed = complete(smollm, auto_handoff=False)
    assert local["cloud_handoff"] is False and local_streamed == local["response"]
    assert local["decode_tokens"] <= 8 and local["confidence"] < 0.999  # so the first tokens are all of them
    above = (local["confidence"] + 1.0) / 2
    before = completion_requests(endpoint)
    r, streamed = complete(smollm, confidence_threshold=above)
    assert r["cloud_handoff"] is True and "confidence" in r["cloud_handoff_reason"], r
    assert wait_count(endpoint, before + 1) == before + 1
    assert streamed == local["response"]  # the local tokens were streamed; the JSON carries the cloud's
    assert r["response"] == cloud_answer(endpoint)
    sure, _ = complete(smollm, confidence_threshold=max(0.0, local["confidence"] - 1e-3))
    assert sure["cloud_handoff"] is False and "cloud_handoff_error" not in sure
    assert sure["response"] == local["response"]


def test_auto_handoff_false_keeps_the_local_answer(smollm, endpoint):
    before = completion_requests(endpoint)
    r, streamed = complete(smollm, confidence_threshold=1.0, auto_handoff=False)
    assert r["cloud_handoff"] is False and "cloud_handoff_error" not in r
    assert r["response"] and streamed == r["response"]
    time.sleep(0.3)
    assert completion_requests(endpoint) == before


def test_refused_connection_keeps_the_local_answer_with_a_note(smollm, monkeypatch):
    monkeypatch.setenv("CACTUS_HANDOFF_URL", "https://127.0.0.1:%d" % free_port())
    for threshold in (1.0, 0.9999):  # forced, then by confidence
        r, streamed = complete(smollm, confidence_threshold=threshold, cloud_timeout_ms=3000)
        assert r["cloud_handoff"] is False and "hand-off" in r["cloud_handoff_error"], r
        assert r["response"] and streamed == r["response"]


def test_no_endpoint_no_handoff(smollm, monkeypatch):
    monkeypatch.delenv("CACTUS_HANDOFF_URL", raising=False)
    r, _ = complete(smollm, confidence_threshold=1.0)
    assert r["cloud_handoff"] is False and "cloud_handoff_error" not in r and r["response"]
