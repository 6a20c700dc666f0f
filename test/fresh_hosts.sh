#!/usr/bin/env bash
# mpi_hostfiles/setup_hosts.sh on fresh hosts, as a Pi owner runs it: two fresh Debian 12 roots
# (mmdebstrap --variant=apt: apt and the essential packages, nothing of pitrain's) are the hosts
# fresh1 and fresh2, reached through test/root_ssh.sh, an ssh stand-in that runs each command
# inside a host's root under the host's name. setup_hosts.sh, unchanged, brings the packages, the
# source, the build and the data to both; then `mpirun --hostfile` trains 2 ranks across them,
# and bench/cluster.sh --hostfile --smoke runs its 1-vs-2 benchmark on them, which share no
# filesystem with this machine: it stages the data on both, writes the table, the plot and
# hosts.md, and refuses a host whose pitrain build differs from this machine's.
# mpi_hostfiles/check_hosts.sh passes both hosts and runs its mpirun step; with four hosts, one
# healthy and three broken (a stale build, no data, another host name), it names each.
# Slow (two package installs and two builds on this machine's cores), so it is a command of its
# own, not part of `meson test`; .ci/run runs it.
# usage, as root on Debian 12 after quickstart.sh: bash test/fresh_hosts.sh [--keep]
#   --keep  leave the hosts' roots in /var/tmp/pitrain-fresh for a look inside
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
keep=false
if [ "${1:-}" = --keep ]; then keep=true; elif [ -n "${1:-}" ]; then
  echo "test/fresh_hosts.sh: unknown option $1; use --keep" >&2; exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "test/fresh_hosts.sh: run it as root: it makes Debian roots and enters them" >&2; exit 2; }
[ -x build/pitrain ] || { echo "test/fresh_hosts.sh: no build/pitrain: run bash quickstart.sh first" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
step() { echo "== test/fresh_hosts.sh: $* ($(date -u +%T), ${SECONDS} s)"; }
# shellcheck source=test/debian_root.sh
. test/debian_root.sh

step "this machine's tools"
retry apt-get update -q
list=$(./packages.sh fresh run)
mapfile -t packages <<<"$list"
retry env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}"

# One pristine root, kept between runs; each run's hosts are fresh copies of it.
base=${PITRAIN_FRESH_CACHE:-/var/cache/pitrain-fresh}/bookworm
if [ ! -f "$base/etc/debian_version" ]; then
  step "a fresh Debian 12 root in $base (once)"
  make_bookworm_root "$base"
fi
export PITRAIN_ROOTS=/var/tmp/pitrain-fresh
rm -rf "$PITRAIN_ROOTS"
mkdir -p "$PITRAIN_ROOTS"
$keep || trap 'rm -rf "$PITRAIN_ROOTS"' EXIT
work=$PITRAIN_ROOTS/head  # this machine's files for the run, at the same path on the hosts
mkdir -p "$work"
printf 'fresh1 slots=1\nfresh2 slots=1\n' >"$work/hosts"
# Every host's name resolves on every host to this machine's address: the hosts share its
# network, as Pis share a LAN.
address=$(ip -4 route get 192.0.2.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[ -n "$address" ] || { echo "test/fresh_hosts.sh: no IPv4 address of this machine (ip route get)" >&2; exit 1; }
name_host() {  # name_host ROOT NAME: the host's own name and /etc/hosts, as a Pi owner sets them
  echo "$2" >"$1/etc/hostname"
  printf '127.0.0.1 localhost\n%s fresh1 fresh2 fresh3 fresh4\n' "$address" >"$1/etc/hosts"
}
for host in fresh1 fresh2; do
  cp -a "$base" "$PITRAIN_ROOTS/$host"
  name_host "$PITRAIN_ROOTS/$host" "$host"
  if PITRAIN_ROOTS=$PITRAIN_ROOTS test/root_ssh.sh "$host" "command -v g++ meson mpirun rsync" >/dev/null; then
    echo "test/fresh_hosts.sh: $host is not fresh: it has a compiler, meson, mpirun or rsync already" >&2
    exit 1
  fi
done

step "the data (Fashion-MNIST, prepared on this machine)"
build/pitrain prepare --idx /usr/share/datasets/fashion-mnist --classes datasets/fashion-mnist.txt --out "$work/data.h5"

step "setup_hosts.sh on fresh1 and fresh2 (packages, source, build, data: the slow part)"
mpi_hostfiles/setup_hosts.sh "$work/hosts" --data "$work/data.h5" --rsh "$src/test/root_ssh.sh"
for host in fresh1 fresh2; do
  for file in "$src/build/pitrain" "$work/data.h5"; do
    [ -f "$PITRAIN_ROOTS/$host$file" ] || { echo "test/fresh_hosts.sh: $host has no $file after setup_hosts.sh" >&2; exit 1; }
  done
done

step "check_hosts.sh on fresh1 and fresh2: every check, then 1 step with mpirun"
check_hosts() { mpi_hostfiles/check_hosts.sh "$1" --data "$work/data.h5" --rsh "$src/test/root_ssh.sh" </dev/null; }
check_hosts "$work/hosts" | tee "$work/check.log"
grep -q "^mpirun: ok: 1 training step on all 2 hosts" "$work/check.log" && ! grep -q FAIL "$work/check.log" ||
  { echo "test/fresh_hosts.sh: check_hosts.sh did not pass two healthy hosts" >&2; exit 1; }

step "mpirun -np 2 across fresh1 and fresh2"
mpi=(mpirun -np 2 --hostfile "$work/hosts" --map-by node --bind-to none --mca plm_rsh_agent "$src/test/root_ssh.sh")
names=$("${mpi[@]}" hostname </dev/null | sort | paste -sd ' ' -)
[ "$names" = "fresh1 fresh2" ] || { echo "test/fresh_hosts.sh: the ranks ran on '$names', not on fresh1 and fresh2" >&2; exit 1; }
"${mpi[@]}" "$src/build/pitrain" train --data "$work/data.h5" --epochs 2 --steps-per-epoch 30 --threads 1 \
  --seed 1 --checkpoint "$work/model.h5" --log "$work/run.csv" </dev/null | tee "$work/train.log"
# Rank 0 runs on fresh1: its checkpoint and log are inside fresh1's root, not on this machine.
[ -f "$PITRAIN_ROOTS/fresh1$work/model.h5" ] && [ ! -e "$work/model.h5" ] ||
  { echo "test/fresh_hosts.sh: no checkpoint from rank 0 inside fresh1" >&2; exit 1; }
python3 - "$PITRAIN_ROOTS/fresh1$work/run.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
losses = [float(r["loss"]) for r in rows]
assert len(rows) == 2 and losses[-1] < losses[0], f"no learning across the two hosts: {losses}"
print(f"losses by epoch {losses}: two fresh hosts trained together")
PY

step "bench/cluster.sh --hostfile across fresh1 and fresh2 (--smoke)"
bench=$work/bench
bash bench/cluster.sh --hostfile "$work/hosts" --rsh "$src/test/root_ssh.sh" --smoke --no-peer --target-share 0.9 \
  --out "$bench" </dev/null 2>&1 | tee "$work/bench.log"
data=$(sed -n 's/^Hosts of .*; data: \(.*\))$/\1/p' "$bench/hosts.md")
if [ -z "$data" ] || [ ! -f "$data" ]; then
  echo "test/fresh_hosts.sh: hosts.md names no data file that this machine has" >&2; exit 1
fi
for host in fresh1 fresh2; do
  cmp "$data" "$PITRAIN_ROOTS/$host$data" || { echo "test/fresh_hosts.sh: the data was not staged on $host at $data" >&2; exit 1; }
  grep -q "^data on $host: " "$work/bench.log" || { echo "test/fresh_hosts.sh: cluster.sh did not say what staging did on $host" >&2; exit 1; }
  grep -q "^| $host | " "$bench/hosts.md" || { echo "test/fresh_hosts.sh: hosts.md does not name $host" >&2; exit 1; }
done
# The 2-host row with a number of ms/step (after sync, time to target, first validation, ratio,
# job); its run finished both epochs, and rank 0's --log came back from fresh1.
grep -qE "^\| pitrain \| mlp \| real \| 2 \| per-step \| ([^|]+ \| ){4}[0-9.]+ \| " "$bench/cluster.md" ||
  { echo "test/fresh_hosts.sh: no 2-host row with ms/step in $bench/cluster.md" >&2; exit 1; }
grep -q "^Epoch 2/2" "$bench/logs/pitrain-mlp-real-2-per-step-1.log" ||
  { echo "test/fresh_hosts.sh: the 2-host run did not finish ($bench/logs/pitrain-mlp-real-2-per-step-1.log)" >&2; exit 1; }
[ "$(wc -l <"$bench/logs/pitrain-mlp-real-2-per-step-1.csv")" -eq 3 ] ||
  { echo "test/fresh_hosts.sh: rank 0's --log of the 2-host run did not come back from fresh1" >&2; exit 1; }
[ -s "$bench/cluster.png" ] || { echo "test/fresh_hosts.sh: no plot $bench/cluster.png" >&2; exit 1; }

step "bench/cluster.sh refuses fresh2 with another build"
# fresh3 and fresh4 are copies of fresh2: fresh3 without the data, fresh4 under another name
# (as a Pi fresh from the imager calls itself), for check_hosts.sh below.
for host in fresh3 fresh4; do cp -a "$PITRAIN_ROOTS/fresh2" "$PITRAIN_ROOTS/$host"; done
rm "$PITRAIN_ROOTS/fresh3$work/data.h5"
name_host "$PITRAIN_ROOTS/fresh3" fresh3
name_host "$PITRAIN_ROOTS/fresh4" raspberrypi
# fresh2's pitrain now names another revision: what a host says after a commit it was not given.
binary=$PITRAIN_ROOTS/fresh2$src/build/pitrain
mv "$binary" "$binary.real"
# shellcheck disable=SC2016  # $0 and $@ are the fake's, inside fresh2
printf '#!/bin/sh\n"$0.real" "$@" | sed "s/(rev [^,]*/(rev 00000000/"\n' >"$binary"
chmod +x "$binary"
if bash bench/cluster.sh --hostfile "$work/hosts" --rsh "$src/test/root_ssh.sh" --smoke --no-peer \
  --out "$work/refused" </dev/null 2>"$work/refused.log"; then
  echo "test/fresh_hosts.sh: cluster.sh ran with another build on fresh2" >&2; exit 1
fi
cat "$work/refused.log"
if [ "$(wc -l <"$work/refused.log")" -ne 1 ] || ! grep -q "fresh2 runs another pitrain build.*setup_hosts.sh" "$work/refused.log"; then
  echo "test/fresh_hosts.sh: the refusal is not one line naming fresh2 and setup_hosts.sh" >&2; exit 1
fi
[ ! -e "$work/refused/cluster.md" ] || { echo "test/fresh_hosts.sh: cluster.sh ran despite the refusal" >&2; exit 1; }

step "check_hosts.sh names each broken host: fresh2's build, fresh3's data, fresh4's name"
printf 'fresh%s slots=1\n' 1 2 3 4 >"$work/hosts4"
if check_hosts "$work/hosts4" >"$work/check4.log"; then
  cat "$work/check4.log"; echo "test/fresh_hosts.sh: check_hosts.sh passed three broken hosts" >&2; exit 1
fi
cat "$work/check4.log"
for expected in "fresh2 +pitrain +FAIL: another build" "fresh3 +data +FAIL: no $work/data.h5" \
  "fresh4 +name +FAIL: calls itself 'raspberrypi'" "problem\(s\): fresh2 pitrain; fresh3 data; fresh4 name;"; do
  grep -qE "$expected" "$work/check4.log" ||
    { echo "test/fresh_hosts.sh: check_hosts.sh did not say '$expected'" >&2; exit 1; }
done
! grep -q -e "^fresh1 .*FAIL" -e "^mpirun" "$work/check4.log" ||
  { echo "test/fresh_hosts.sh: check_hosts.sh failed the healthy fresh1, or ran mpirun despite the problems" >&2; exit 1; }
mv "$binary.real" "$binary"
step "ok"
