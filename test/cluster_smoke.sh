#!/usr/bin/env bash
# Smoke run of the cluster benchmark: 2 emulated hosts, a few steps. Needs root and network
# namespaces; skipped (exit 77) where the machine does not allow them.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root=$here cpu=0.5
# shellcheck source=bench/netns_cluster.sh
. "$here/bench/netns_cluster.sh"
emulation_available || exit 77
out=$(mktemp -d /tmp/pitrain-smoke-XXXXXX)
trap 'teardown; rm -rf "$out"' EXIT
export PITRAIN_CLUSTER=ptcsmoke$$

# --latency: a TCP round trip between two hosts takes at least twice the 3 ms added.
PITRAIN_NETNS_DELAY=$(dirname "$PITRAIN")/bench/netns_delay
export PITRAIN_NETNS_DELAY
latency_us=3000 delay_program=$PITRAIN_NETNS_DELAY
make_cluster 2 1000
ip netns exec "$PITRAIN_CLUSTER-h2" python3 -c '
import socket, sys
s = socket.create_server((sys.argv[1], 5000)); c, _ = s.accept()
while (b := c.recv(1)): c.sendall(b)' "$net.12" &
rtt_ms=$(ip netns exec "$PITRAIN_CLUSTER-h1" python3 -c '
import socket, sys, time
for attempt in range(50):  # the server may not listen yet
    try: s = socket.create_connection((sys.argv[1], 5000)); break
    except OSError: time.sleep(0.1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for i in range(10):
    t = time.perf_counter(); s.sendall(b"x"); s.recv(1); times.append(time.perf_counter() - t)
print(f"{1e3 * min(times):.2f}")' "$net.12")
echo "round trip with 3 ms added a frame: $rtt_ms ms"
awk -v r="$rtt_ms" 'BEGIN { exit !(r >= 6) }' || { echo "the latency was not added"; exit 1; }
teardown
latency_us=0
# Twice each (the table gives medians), with the slow-link recipe and an overlapped round.
# A rare launch on the emulated hosts never reaches training; cluster.sh starts such a launch
# again. A run that still did not finish fails the test, with its log.
BUILD=$(dirname "$PITRAIN") timeout 300 bash "$here/bench/cluster.sh" --smoke --repeat 2 --max-seconds 60 --out "$out" \
  --latency 1 --train-args "--sync local-sgd --sync-every 4 --overlap --grad-dtype bf16 --error-feedback --lr-scaling linear"
cat "$out/cluster.md"
for log in "$out"/logs/pitrain-mlp-ethernet-2-*.log; do
  case $log in *.launch[0-9]*.log) continue ;; esac  # a launch started again: its run's log counts
  grep -q "Epoch 2/2" "$log" || { echo "== $log (did not finish)"; cat "$log"; exit 1; }
done
grep -q "medians of 2 runs; 1 ms added to every frame a host sends" "$out/cluster.md"
# The 2-host row: sync, time to target, first validation at it, ratio, job, then a number of ms/step.
grep -qE "^\| pitrain \| mlp \| ethernet \| 2 \| local-sgd \| ([^|]+ \| ){4}[0-9.]+ \| " "$out/cluster.md"
grep -qE "^\| pitrain \| mlp \| ethernet \| 1 \| " "$out/cluster.md"
grep -q "this machine" "$out/hosts.md" || { echo "no hosts.md describing this machine"; exit 1; }
[ "$(ip netns list | grep -c "$PITRAIN_CLUSTER")" -eq 0 ] || { echo "namespaces left behind"; exit 1; }
echo "cluster smoke: ok"
