"""Streaming load against an OpenAI-compatible server (cactus serve or llama-server), stdlib only.
Each client sends streamed chat requests one after another; per request it records the time to
first token, the decode rate and whether the answer completed. Used by compare_server.py (fixed
request counts) and server_soak.py (fixed duration). Every loop is bounded in count and time."""
import http.client
import json
import threading
import time

TEXT = "The quick brown fox jumps over the lazy dog while the farmer counts his sheep in the valley. "


def request_body(i, prompt_words, max_tokens):
    return {"model": "m", "messages": [{"role": "user", "content": "Request %d. %s Continue the story." % (i, TEXT * prompt_words)}],
            "max_tokens": max_tokens, "temperature": 0.0, "stream": True, "ignore_eos": True}


def one_request(host, port, body, timeout=300, hang_up_after=None):
    """Streams one request; returns a dict of measurements."""
    t0 = time.time()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    out = {"ok": False, "ttft": None, "tokens": 0, "total": None, "left": False, "error": None}
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            out["error"] = "HTTP %d" % resp.status
            return out
        first = last = None
        finish = None
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                out["ok"] = finish is not None
                break
            chunk = json.loads(line[6:])
            if "error" in chunk:
                out["error"] = str(chunk["error"])[:200]
                break
            for ch in chunk.get("choices", []):
                if ch.get("delta", {}).get("content"):
                    now = time.time()
                    first = first or now
                    last = now
                    out["tokens"] += 1
                finish = ch.get("finish_reason") or finish
            if hang_up_after is not None and out["tokens"] >= hang_up_after:
                out["left"] = True
                out["ok"] = True
                break
        if first is not None:
            out["ttft"] = first - t0
            out["decode_tps"] = (out["tokens"] - 1) / (last - first) if out["tokens"] > 1 and last > first else None
    except Exception as e:  # noqa: BLE001  (reported per request)
        out["error"] = repr(e)[:200]
    finally:
        conn.close()
        out["total"] = time.time() - t0
    return out


def run_clients(host, port, clients, requests_per_client=None, seconds=None, prompt_words=(2,), max_tokens=32,
                hang_up_every=0):
    """Runs `clients` threads; each stops after requests_per_client requests or `seconds`."""
    results, lock = [], threading.Lock()
    deadline = time.time() + seconds if seconds else None

    def client(c):
        i = 0
        while True:
            if requests_per_client is not None and i >= requests_per_client:
                return
            if deadline is not None and time.time() >= deadline:
                return
            n = i * clients + c  # request number over all clients: lengths and hang-ups mix across clients
            words = prompt_words[n % len(prompt_words)]
            hang = 2 if hang_up_every and n % hang_up_every == hang_up_every - 1 else None
            r = one_request(host, port, request_body(n, words, max_tokens), hang_up_after=hang)
            with lock:
                results.append(r)
            i += 1

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.time() - t0


def summary(results, wall):
    def pct(values, q):
        values = sorted(v for v in values if v is not None)
        return values[min(len(values) - 1, int(q * len(values)))] if values else None

    done = [r for r in results if r["ok"] and not r["left"]]
    tokens = sum(r["tokens"] for r in results)
    return {"requests": len(results), "completed": len(done), "hung_up": sum(r["left"] for r in results),
            "failed": sum(not r["ok"] for r in results),
            "errors": sorted({r["error"] for r in results if r["error"]})[:5],
            "ttft_p50_s": pct([r["ttft"] for r in done], 0.5), "ttft_p90_s": pct([r["ttft"] for r in done], 0.9),
            "decode_tps_p50": pct([r.get("decode_tps") for r in done], 0.5),
            "aggregate_tps": tokens / wall if wall > 0 else 0.0, "wall_s": wall}
