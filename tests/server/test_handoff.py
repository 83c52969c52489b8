"""The cloud hand-off end to end: a second `cactus serve` on 127.0.0.1 stands in for the cloud,
over HTTPS with a certificate made for this test; the hand-off happens on request and when the
local confidence is below the threshold, and falls back to the local answer (with a note) when the
endpoint refuses the connection or its certificate is not trusted."""
import time

import openai
import pytest

from serverproc import ServerProcess, completion_requests, free_port, make_certificate

ASK = [{"role": "system", "content": "You are a helpful assistant."},
       {"role": "user", "content": "What is the capital city of France?"}]


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def cloud(cert):
    crt, key = cert
    s = ServerProcess("--ssl-cert-file", crt, "--ssl-key-file", key, "--quiet", scheme="https", ca=crt,
                      alias="cloud-model")
    yield s
    s.stop()


def front(url, ca=None, *extra):
    env = {"CACTUS_HANDOFF_URL": url, "CACTUS_HANDOFF_MODEL": "big-model", "CACTUS_HANDOFF_KEY": "cloud-key"}
    if ca:
        env["CACTUS_HANDOFF_CA"] = ca
    return ServerProcess("--quiet", "--handoff-timeout-ms", "5000", *extra, env=env)


def cloud_requests(cloud):
    return completion_requests(cloud)


def chat(server, **kw):
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
    return c.chat.completions.create(model="local", messages=ASK, max_tokens=8, temperature=0, **kw)


def test_handoff_over_tls_on_request_and_on_low_confidence(cloud, cert):
    s = front(cloud.url, cert[0])
    try:
        before = cloud_requests(cloud)
        forced = chat(s, extra_body={"cloud_handoff": True}).model_dump()
        assert forced["cloud_handoff"] is True and forced["cloud_handoff_reason"] == "requested"
        assert forced["cloud_handoff_model"] == "big-model"  # CACTUS_HANDOFF_MODEL reached the endpoint
        deadline = time.time() + 5  # the count is taken once the answer is written
        while cloud_requests(cloud) < before + 1 and time.time() < deadline:
            time.sleep(0.05)
        assert cloud_requests(cloud) == before + 1  # and the second server answered
        assert "Paris" in forced["choices"][0]["message"]["content"]

        low = chat(s, extra_body={"confidence_threshold": 1.0}).model_dump()  # no answer is that sure
        assert low["cloud_handoff"] is True and "confidence" in low["cloud_handoff_reason"]
        assert low["choices"][0]["message"]["content"] == forced["choices"][0]["message"]["content"]

        sure = chat(s, extra_body={"confidence_threshold": 0.0}).model_dump()
        assert sure["cloud_handoff"] is False and "cloud_handoff_error" not in sure

        streamed = chat(s, stream=True, extra_body={"confidence_threshold": 1.0})
        chunks = [ch.model_dump() for ch in streamed]
        text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
        assert text == forced["choices"][0]["message"]["content"]
        assert any(ch.get("cloud_handoff") is True for ch in chunks)
    finally:
        s.stop()


def test_untrusted_certificate_falls_back_to_the_local_answer(cloud):
    s = front(cloud.url)  # no CA: the test certificate is not trusted
    try:
        r = chat(s, extra_body={"cloud_handoff": True}).model_dump()
        assert r["cloud_handoff"] is False and "hand-off" in r["cloud_handoff_error"]
        assert "Paris" in r["choices"][0]["message"]["content"]
    finally:
        s.stop()


def test_refused_connection_falls_back_to_the_local_answer():
    s = front("https://127.0.0.1:%d" % free_port())
    try:
        r = chat(s, extra_body={"confidence_threshold": 1.0}).model_dump()
        assert r["cloud_handoff"] is False and "hand-off" in r["cloud_handoff_error"]
        assert r["choices"][0]["message"]["content"]
        r = chat(s, extra_body={"cloud_handoff": True}).model_dump()
        assert r["cloud_handoff"] is False and r["choices"][0]["message"]["content"]
    finally:
        s.stop()


def test_handoff_needs_an_endpoint(server):
    with pytest.raises(openai.BadRequestError) as e:
        chat(server, extra_body={"cloud_handoff": True})
    assert e.value.body["param"] == "cloud_handoff"
