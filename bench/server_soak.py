"""Soak test of `cactus serve` (outside CI): 64 streaming clients for 10 minutes against one server
on 127.0.0.1, mixed prompt lengths, every 8th request hung up after two tokens. Samples the
server's RSS every 10 s; prints the summary (failed requests must be 0, RSS flat) as JSON.
    python3 bench/server_soak.py [--clients 64] [--minutes 10] [--parallel 8]"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_server  # noqa: E402
import server_load  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=24)
    args = ap.parse_args()
    port = compare_server.free_port()
    cmd = [os.path.join(REPO, "build", "bin", "cactus"), "serve", args.model, "--port", str(port), "-np",
           str(args.parallel), "-c", str(args.parallel * 2048), "-t", str(args.threads), "--quiet",
           "--max-queue", str(args.clients * 2)]
    proc = subprocess.Popen(cmd)
    compare_server.wait_health(port, proc)
    samples, stop = [], threading.Event()

    def sample():
        t0 = time.time()
        while not stop.wait(10.0):
            samples.append((round(time.time() - t0), round(rss_mb(proc.pid), 1)))

    sampler = threading.Thread(target=sample)
    sampler.start()
    results, wall = server_load.run_clients("127.0.0.1", port, args.clients, requests_per_client=100000,
                                            seconds=60.0 * args.minutes, prompt_words=(1, 4, 12, 30),
                                            max_tokens=args.max_tokens, hang_up_every=8)
    stop.set()
    sampler.join()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    out = dict(server_load.summary(results, wall), clients=args.clients, parallel=args.parallel,
               rss_mb_first=samples[0][1] if samples else None, rss_mb_last=samples[-1][1] if samples else None,
               rss_mb_max=max(s[1] for s in samples) if samples else None, rss_samples=samples)
    print(json.dumps(out, indent=1))
    return 0 if out["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
