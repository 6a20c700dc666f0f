#!/usr/bin/env bash
# Should rank 0 read the dataset and send every rank its slice? This measures the cost: the time
# to move one rank's slice between two emulated hosts (network namespaces, tc tbf both ways, TCP
# reno), per link rate. Root only.
# usage: sudo bench/slice_transfer.sh [BYTES] [RATES_MBIT...]
#   default: 9,200,000 bytes (a quarter of the Quick Draw subsets' 36.7 MB), 20 100 1000
set -euo pipefail
bytes=${1:-9200000}
shift || true
rates=("${@:-20 100 1000}")
# shellcheck source=bench/netns_link.sh
. "$(dirname "$0")/netns_link.sh"
a=ptx$$a b=ptx$$b
# The processes first: a server left waiting by a failed run would outlive its namespace's name.
cleanup() {
  local ns
  for ns in "$a" "$b"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT
for rate in ${rates[@]}; do
  cleanup
  ip netns add "$a"
  ip netns add "$b"
  ip link add va netns "$a" type veth peer name vb netns "$b"
  ip -n "$a" addr add 10.99.0.1/24 dev va
  ip -n "$b" addr add 10.99.0.2/24 dev vb
  for ns in "$a" "$b"; do
    dev=$([ "$ns" = "$a" ] && echo va || echo vb)
    ip -n "$ns" link set "$dev" up
    shape_egress "$ns" "$dev" "$rate"
    use_reno "$ns"
  done
  ip netns exec "$b" python3 -c '
import socket
s = socket.socket(); s.bind(("10.99.0.2", 5001)); s.listen(1)
c, _ = s.accept()
while c.recv(1 << 16): pass
c.sendall(b"k")' &
  ip netns exec "$a" python3 -c '
import socket, sys, time
n, rate = int(sys.argv[1]), sys.argv[2]
for tries in range(100):  # the server may not listen yet: up to 5 s
    try:
        s = socket.create_connection(("10.99.0.2", 5001))
        break
    except ConnectionRefusedError:
        if tries == 99:
            raise
        time.sleep(0.05)
t = time.time()
s.sendall(bytes(n)); s.shutdown(socket.SHUT_WR); s.recv(1)
print(f"{rate} Mbit/s: {n / 1e6:.1f} MB in {time.time() - t:.2f} s")' "$bytes" "$rate"
  wait
done
