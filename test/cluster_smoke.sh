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
trap 'rm -rf "$out"' EXIT
export PITRAIN_CLUSTER=ptcsmoke$$
# Twice each (the table gives medians), with the slow-link recipe and an overlapped round.
# A rare launch on the emulated hosts never reaches training (bench/RESULTS.md, "Stalls"): the
# median row needs one of the two runs, and a stalled run's log is shown.
BUILD=$(dirname "$PITRAIN") timeout 300 bash "$here/bench/cluster.sh" --smoke --repeat 2 --max-seconds 60 --out "$out" \
  --train-args "--sync-every 4 --overlap --grad-dtype bf16 --error-feedback --lr-scaling linear"
cat "$out/cluster.md"
for log in "$out"/logs/pitrain-mlp-ethernet-2-*.log; do
  grep -q "Epoch 2/2" "$log" || { echo "== $log (did not finish)"; cat "$log"; }
done
grep -q "medians of 2 runs" "$out/cluster.md"
grep -qE "^\| pitrain \| mlp \| ethernet \| 2 \| [^|]+ \| [^|]+ \| [0-9.]+ \| " "$out/cluster.md"
grep -qE "^\| pitrain \| mlp \| ethernet \| 1 \| " "$out/cluster.md"
[ "$(ip netns list | grep -c "$PITRAIN_CLUSTER")" -eq 0 ] || { echo "namespaces left behind"; exit 1; }
echo "cluster smoke: ok"
