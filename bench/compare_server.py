"""cactus serve vs llama-server on the same model, slot count and threads: time to first token,
per-request decode rate and aggregate throughput at 1, 4 and 16 concurrent streaming clients.
Both servers run side by side on 127.0.0.1 (started here, one at a time per level, alternated).
    python3 bench/compare_server.py [--model PATH] [--slots 16] [--threads 2] [--clients 1,4,16] [--device cuda]
--device cuda: cactus serve --device cuda against llama-server with every layer on the GPU (-ngl 99).
llama-server comes from bench/build_llama_tool.sh llama-server (built once into ~/.cache, never committed).
Prints a table, writes JSON to build/bench-results/server_compare_<peer>.json and appends one row per
client count (medians of aggregate tok/s) to bench/results/history.jsonl."""
import argparse
import json
import os
import signal
import statistics
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402
import server_load  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_health(port, proc, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("server not ready in %d s" % timeout)


def start(kind, args, port):
    ctx = str(args.ctx_per_slot * args.slots)
    if kind.startswith("cactus"):
        cmd = [os.path.join(args.build, "bin", "cactus"), "serve", args.model, "--port", str(port), "-np",
               str(args.slots), "-c", ctx, "-t", str(args.threads), "--quiet"]
        if kind == "cactus-engine-per-slot":
            cmd.append("--engine-per-slot")
        if args.device != "cpu":
            cmd += ["--device", args.device]
    else:
        cmd = [args.llama_server, "-m", args.model, "--port", str(port), "-np", str(args.slots), "-c", ctx,
               "-t", str(args.threads), "--no-webui"]
        cmd += ["-ngl", "0" if args.device == "cpu" else "99"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_health(port, proc)
    return proc


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def main():  # noqa: C901
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/cactus/models/smollm2-135m.gguf"))
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--llama-server", default=None)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--ctx-per-slot", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--requests-per-client", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompt-words", type=int, default=5, help="~20 tokens each")
    ap.add_argument("--peer", default="llama-server", choices=["llama-server", "cactus-engine-per-slot"],
                    help="what cactus serve is compared with")
    ap.add_argument("--repeats", type=int, default=1, help="alternated runs per level")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where both servers run the model")
    ap.add_argument("--out", default=None)
    ap.add_argument("--history", default=history.HISTORY, help="rows are appended here (default %(default)s)")
    ap.add_argument("--no-history", action="store_true", help="do not append rows to the history file")
    args = ap.parse_args()
    if args.out is None:
        args.out = os.path.join(REPO, "build", "bench-results", "server_compare_%s.json" % args.peer)
    if args.peer == "llama-server" and args.llama_server is None:
        script = os.path.join(REPO, "bench", "build_llama_tool.sh")
        args.llama_server = subprocess.run(["bash", script, "llama-server"], check=True, stdout=subprocess.PIPE,
                                           text=True).stdout.strip().splitlines()[-1]
    rows = []
    for clients in [int(c) for c in args.clients.split(",")]:
        for kind in ("cactus", args.peer) * args.repeats:
            port = free_port()
            proc = start(kind, args, port)
            try:
                server_load.run_clients("127.0.0.1", port, 1, 1, prompt_words=(args.prompt_words,), max_tokens=4)  # warm-up
                results, wall = server_load.run_clients("127.0.0.1", port, clients, args.requests_per_client,
                                                        seconds=600, prompt_words=(args.prompt_words,),
                                                        max_tokens=args.max_tokens)
            finally:
                stop(proc)
            row = dict(server=kind, clients=clients, **server_load.summary(results, wall))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print("%-22s %7s %10s %10s %14s %14s %6s" % ("server", "clients", "TTFT p50", "TTFT p90", "decode tok/s", "aggregate tok/s", "failed"))
    for r in rows:
        print("%-22s %7d %8.0fms %8.0fms %14.1f %14.1f %6d" % (r["server"], r["clients"], 1e3 * (r["ttft_p50_s"] or 0),
                                                           1e3 * (r["ttft_p90_s"] or 0), r["decode_tps_p50"] or 0,
                                                           r["aggregate_tps"], r["failed"]))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"model": args.model, "slots": args.slots, "threads": args.threads, "device": args.device,
                   "rows": rows}, f, indent=1)
    if not args.no_history:
        history.append_rows(history_rows(rows, args), args.history)


def history_rows(rows, args):
    """One history row per client count: medians of cactus's and the peer's aggregate tok/s."""
    out, date, commit, cpu, tier = [], history.now(), history.git_commit(), history.local_cpu(), history.local_tier()
    for clients in sorted({r["clients"] for r in rows}):
        ours = [r for r in rows if r["clients"] == clients and r["server"] == "cactus"]
        theirs = [r for r in rows if r["clients"] == clients and r["server"] != "cactus"]
        out.append(history.make_row(
            date=date, commit=commit, cpu=cpu, tier=tier, device=args.device, file=os.path.basename(args.model),
            threads=args.threads, test="serve c%d aggregate" % clients,
            ours=statistics.median(r["aggregate_tps"] for r in ours),
            peer=statistics.median(r["aggregate_tps"] for r in theirs) if theirs else None, peer_name=args.peer,
            unit="tok/s", source="bench/compare_server.py", extra={"slots": args.slots, "runs": ours + theirs}))
    return out


if __name__ == "__main__":
    main()
