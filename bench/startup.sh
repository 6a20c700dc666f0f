#!/usr/bin/env bash
# Start-up on the emulated hosts: a 1-step `mlp` job (batch 8 a host), 1 host against N, the
# two alternating. For each: the job's start-up as pitrain counts it (`startup_seconds`: the
# slowest rank, from its launch to the first step), its `job_seconds` (rank 0's launch to its
# end) and mpirun's time from outside; medians. Root only; needs bench/netns_cluster.sh's tools.
# usage: bench/startup.sh [--profile P] [--hosts N] [--repeat R] [--host-speed B | --cpu F] [--train-args S]
#   --profile     wlan (default), wlan-cell, ethernet, gigabit or RATEmbit, as in bench/cluster.sh
#   --repeat      runs of each (default 5)
#   --train-args  extra `pitrain train` arguments (default --sync auto)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
profile=wlan hosts=4 repeat=5 host_speed=pi4 cpu="" train_args="--sync auto"
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --host-speed) host_speed=$2 cpu=""; shift 2 ;;
    --cpu) cpu=$2 host_speed=""; shift 2 ;;
    --train-args) train_args=$2; shift 2 ;;
    *) echo "bench/startup.sh: unknown option $1 (see the header of this script)" >&2; exit 2 ;;
  esac
done
# shellcheck source=bench/netns_cluster.sh
. "$root/bench/netns_cluster.sh"
emulation_available || exit 0
[ -z "$host_speed" ] || cpu=$(host_speed_cpu "$host_speed" "$build") || exit 2
work=$(mktemp -d /tmp/pitrain-startup-XXXXXX)
trap 'teardown; rm -rf "$work"' EXIT
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
prepare_bench_data "$build" "$root" "$work/d.h5"
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
make_profile_cluster "$hosts" "$profile"
emulated_hostfile 1 >"$work/one"
emulated_hostfile "$hosts" >"$work/all"
: >"$work/runs"
for run in $(seq "$repeat"); do
  for n in 1 "$hosts"; do
    hf=$work/one
    [ "$n" = 1 ] || hf=$work/all
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    emulated_mpirun 120 -np "$n" --hostfile "$hf" "$build/pitrain" train --data "$work/d.h5" --model mlp \
      --batch-size 8 --threads 1 --epochs 1 --steps-per-epoch 1 --json $train_args >"$work/out" 2>"$work/err" ||
      { echo "run $run on $n host(s) failed:" >&2; cat "$work/err" >&2; exit 1; }
    echo "$n $(tail -n 1 "$work/out") $(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { print t1 - t0 }')" >>"$work/runs"
  done
done
python3 - "$work/runs" "$profile" "$hosts" "${host_speed:-$cpu core}" "$train_args" "$bench_data" <<'PY'
import json, statistics, sys
runs, profile, hosts, speed, args, data = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
by = {}
for line in open(runs):
    n, rest = line.split(" ", 1)
    text, outside = rest.rsplit(" ", 1)
    j = json.loads(text)
    by.setdefault(int(n), []).append((j["startup_seconds"], j["job_seconds"], float(outside), j["sync_reason"]))
med = lambda n, i: statistics.median(r[i] for r in by[n])
print(f"1-step mlp, {profile}, hosts at {speed}, train {args}; data: {data}; medians of {len(by[1])}\n")
print("| hosts | start-up s | job s | mpirun s (outside) |\n|---|---|---|---|")
for n in (1, hosts):
    print(f"| {n} | {med(n, 0):.2f} | {med(n, 1):.2f} | {med(n, 2):.2f} |")
print(f"\n{hosts} hosts beyond 1: start-up +{med(hosts, 0) - med(1, 0):.2f} s, job +{med(hosts, 1) - med(1, 1):.2f} s, "
      f"outside +{med(hosts, 2) - med(1, 2):.2f} s; sync: {by[hosts][-1][3]}")
PY
