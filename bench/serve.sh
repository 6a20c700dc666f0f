#!/usr/bin/env bash
# `pitrain serve` under load: starts it on a free port of 127.0.0.1 with MODEL, runs
# bench/serve_load.py with 1 client (the model's time for one image, no contention) and with
# CLIENTS clients (requests a second), SECONDS each, and prints their JSON lines.
# usage: bench/serve.sh MODEL.h5 [CLIENTS] [SECONDS]   (default 8 clients, 10 s)
set -euo pipefail
model=${1:?usage: bench/serve.sh MODEL.h5 [CLIENTS] [SECONDS]}
clients=${2:-8}
seconds=${3:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=$(mktemp /tmp/pitrain-serve-bench-XXXXXX)
"$build/pitrain" serve --model "$model" --port 0 >"$out" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 50); do grep -q "http://" "$out" && break; sleep 0.1; done
port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")  # no pipeline: a miss must reach the message
[ -n "$port" ] || { echo "serve did not start:"; cat "$out"; exit 1; }
python3 "$root/bench/serve_load.py" --port "$port" --clients 1 --seconds "$seconds"
python3 "$root/bench/serve_load.py" --port "$port" --clients "$clients" --seconds "$seconds"
