"""A bounded load test on 127.0.0.1: 16 concurrent clients send a fixed number of requests with
mixed prompt lengths, streamed and whole; some clients hang up mid-stream. Every other request
must get a complete, valid answer, every slot must be free afterwards, and the server's memory
must stay flat (RSS after the run vs after a warm-up that touched every slot)."""
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from serverproc import metric

CLIENTS = 16
REQUESTS = 32
TEXT = ("The quick brown fox jumps over the lazy dog while the farmer counts his sheep in the valley. ")


def body(i, stream):
    rng = random.Random(i)
    words = rng.choice([1, 2, 5, 12])  # ~30 to ~260 prompt tokens; shared prefixes, as in real traffic
    return {"messages": [{"role": "user", "content": "%s Summarise request %d." % (TEXT * words, i)}],
            "max_tokens": rng.choice([4, 8, 16]), "temperature": 0.7, "seed": i, "stream": stream}


def run_one(url, i):
    """Returns ('ok'|'left'|'bad', detail)."""
    mode = i % 4  # 0: whole, 1-2: streamed, 3: streamed and hung up after two chunks
    with httpx.Client(timeout=300) as c:
        if mode == 0:
            r = c.post(url + "/v1/chat/completions", json=body(i, False))
            if r.status_code != 200:
                return "bad", "status %d %s" % (r.status_code, r.text[:200])
            doc = r.json()
            ok = doc["choices"][0]["finish_reason"] in ("stop", "length") and doc["usage"]["completion_tokens"] > 0
            return ("ok", "") if ok else ("bad", json.dumps(doc)[:300])
        with c.stream("POST", url + "/v1/chat/completions", json=body(i, True)) as r:
            if r.status_code != 200:
                return "bad", "status %d" % r.status_code
            finish, done, chunks = None, False, 0
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    return "bad", line[:300]
                chunks += 1
                if mode == 3 and chunks == 2:
                    return "left", ""  # closing the response drops the connection
                for ch in chunk["choices"]:
                    finish = ch.get("finish_reason") or finish
            return ("ok", "") if done and finish in ("stop", "length") else ("bad", "finish %s done %s" % (finish, done))


def test_sixteen_clients_bounded_run(server):
    # Warm-up: every slot prefills a long prompt once, so later growth would be a leak.
    with ThreadPoolExecutor(4) as pool:
        warm = list(pool.map(lambda i: run_one(server.url, 1000 + 4 * i), range(4)))
    assert all(k == "ok" for k, _ in warm), warm
    rss_before = server.rss_bytes()
    t0 = time.time()
    with ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(lambda i: run_one(server.url, i), range(REQUESTS)))
    elapsed = time.time() - t0
    bad = [(i, d) for i, (k, d) in enumerate(results) if k == "bad"]
    assert not bad, bad
    assert sum(k == "left" for k, _ in results) == REQUESTS // 4
    assert elapsed < 240

    deadline = time.time() + 10
    while time.time() < deadline:
        text = server.get("/metrics")[1].decode()
        if metric(text, "cactus_slots_busy") == 0 and metric(text, "cactus_queue_length") == 0:
            break
        time.sleep(0.2)
    assert metric(text, "cactus_slots_busy") == 0 and metric(text, "cactus_queue_length") == 0
    props = json.loads(server.get("/props")[1])
    assert not any(s["is_processing"] for s in props["slots"])
    rss_after = server.rss_bytes()
    assert rss_after < rss_before * 1.05 + (16 << 20), (rss_before, rss_after)
    print("load: %d requests by %d clients in %.1f s; RSS %.1f -> %.1f MB"
          % (REQUESTS, CLIENTS, elapsed, rss_before / 2**20, rss_after / 2**20))
