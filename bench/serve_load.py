#!/usr/bin/env python3
"""Load test of `pitrain serve`: CLIENTS threads, each on its own keep-alive connection, post
images to /api/predict for SECONDS seconds against a server on 127.0.0.1. Prints requests a
second, client-side latency, and the model's time on the server (its Server-Timing header).

  build/pitrain serve --model datasets/model.h5 &
  bench/serve_load.py --port 8000 --clients 8 --seconds 10
(bench/serve.sh does both, with 1 client and with CLIENTS.)
"""
import argparse
import http.client
import json
import random
import statistics
import threading
import time

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--port", type=int, default=8000)
parser.add_argument("--clients", type=int, default=8, help="connections at once (1-64)")
parser.add_argument("--seconds", type=float, default=10, help="how long (at most 60)")
args = parser.parse_args()
if not 1 <= args.clients <= 64 or not 0 < args.seconds <= 60:
    parser.error("--clients 1-64 and --seconds up to 60: a bounded test")

rng = random.Random(0)
bodies = [json.dumps({"pixels": [rng.choice((0, 0, 0, 255)) for _ in range(784)]}) for _ in range(16)]
end = time.time() + args.seconds
latency, server_ms, failures = [], [], []
lock = threading.Lock()


def connect(k):
    # Eight clients from each loopback address: the server keeps at most 8 connections of one address.
    return http.client.HTTPConnection("127.0.0.1", args.port, timeout=10, source_address=(f"127.0.0.{1 + k // 8}", 0))


def client(k):
    conn = connect(k)
    mine, theirs = [], []
    i = k
    while time.time() < end:
        start = time.perf_counter()
        try:
            conn.request("POST", "/api/predict", bodies[i % len(bodies)], {"Content-Type": "application/json"})
            res = conn.getresponse()
            res.read()
            if res.status != 200:
                raise RuntimeError(f"HTTP {res.status}")
        except Exception as e:  # a refused or dropped request counts, then a fresh connection
            with lock:
                failures.append(str(e))
            conn.close()
            conn = connect(k)
            continue
        mine.append(time.perf_counter() - start)
        timing = res.getheader("Server-Timing", "")
        if timing.startswith("predict;dur="):
            theirs.append(float(timing.split("=", 1)[1]))
        i += 1
    conn.close()
    with lock:
        latency.extend(mine)
        server_ms.extend(theirs)


threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
start = time.time()
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.time() - start
if not latency:
    raise SystemExit(f"no request answered ({len(failures)} failed: {failures[:1]}); is the server on port {args.port}?")
q = lambda v, f: sorted(v)[min(len(v) - 1, int(f * len(v)))]
print(json.dumps({
    "clients": args.clients,
    "seconds": round(elapsed, 2),
    "requests": len(latency),
    "failed": len(failures),
    "requests_per_second": round(len(latency) / elapsed, 1),
    "latency_ms_median": round(1e3 * statistics.median(latency), 2),
    "latency_ms_p99": round(1e3 * q(latency, 0.99), 2),
    "predict_ms_median": round(statistics.median(server_ms), 3) if server_ms else None,
    "predict_ms_p99": round(q(server_ms, 0.99), 3) if server_ms else None,
}))
