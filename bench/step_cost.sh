#!/usr/bin/env bash
# What a step costs on N emulated hosts against one: the same training on 1 host and on N hosts
# of one emulated cluster, alternating run by run, at one or more CPU shares. Gives the median
# ms a step (an epoch's seconds, the slowest rank's, over its steps; the first epoch left out:
# it holds --sync auto's probes and the first connections), the ratio of N hosts to 1, and the
# share of the first host's quota periods in which it was throttled. Root only.
# usage: bench/step_cost.sh [--profile P] [--speeds LIST] [--model mlp|cnn] [--hosts N]
#                           [--rounds R] [--epochs E] [--train-args S] [--out FILE]
#   --profile     link profile as in bench/cluster.sh (default gigabit: the link is no limit)
#   --speeds      host speeds: pi3b+, pi4, pi5, a fraction of one ("pi4/2"), or a raw share of a
#                 core ("0.2"); default pi4,pi4/2
#   --model       mlp at batch 8 a rank (default), cnn at 32; epochs of 3,200 and 9,600 images
#   --train-args  extra `pitrain train` arguments (default --sync auto)
#   --out FILE    every run as a JSON line (default bench/results/step_cost.jsonl)
# e.g. bash bench/step_cost.sh --rounds 5
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}  # the build timed
profile=gigabit speeds=pi4,pi4/2 model=mlp hosts=4 rounds=3 epochs=4 train_args="--sync auto"
out=$root/bench/results/step_cost.jsonl
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --speeds) speeds=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --train-args) train_args=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "bench/step_cost.sh: unknown option $1 (see the header of this script)" >&2; exit 2 ;;
  esac
done
[ "$epochs" -ge 2 ] || { echo "bench/step_cost.sh: --epochs $epochs: give 2 or more (the first is left out)" >&2; exit 2; }
batch=8 images=3200
[ "$model" = cnn ] && batch=32 images=9600
cpu=1  # set per speed below
# shellcheck source=bench/netns_cluster.sh
. "$root/bench/netns_cluster.sh"
emulation_available || exit 0
work=$(mktemp -d /tmp/pitrain-step-cost-XXXXXX)
trap 'teardown; rm -rf "$work"' EXIT
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
prepare_bench_data "$build" "$root" "$work/d.h5"
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$(dirname "$out")"
: >"$out"

# share_of SPEED: the cores a host gets for SPEED (a board, a board over a divisor, or cores).
share_of() {
  local board=${1%/*} divisor=1
  [ "$board" = "$1" ] || divisor=${1#*/}
  if [[ $board =~ ^[0-9.]+$ ]]; then
    echo "$board"
  else
    awk -v c="$(host_speed_cpu "$board" "$build")" -v d="$divisor" 'BEGIN { printf "%.4f\n", c / d }'
  fi
}

# run_once N SPEED ROUND: one training on the first N hosts, one JSON line into $out.
run_once() {
  local n=$1 steps=$((images / ($1 * batch))) cg=/sys/fs/cgroup/cpu/$PITRAIN_CLUSTER-h1 rc=0
  emulated_hostfile "$n" >"$work/hosts"
  cat "$cg/cpu.stat" >"$work/before"
  # The emulated launcher now and then leaves a host's daemon unstarted (bench/cluster.sh): a run
  # that wrote no log is started again, up to three times.
  for _ in 1 2 3; do
    rm -f "$work/log.csv"
    rc=0
    # shellcheck disable=SC2086
    emulated_mpirun 300 -np "$n" --hostfile "$work/hosts" "$build/pitrain" train --data "$work/d.h5" \
      --model "$model" --batch-size "$batch" --threads 1 --epochs "$epochs" --steps-per-epoch "$steps" \
      --log "$work/log.csv" $train_args >"$work/out" 2>&1 || rc=$?
    [ -f "$work/log.csv" ] && break
  done
  cat "$cg/cpu.stat" >"$work/after"
  python3 - "$work" "$n" "$2" "$cpu" "$3" "$steps" "$rc" >>"$out" <<'PY'
import csv, json, os, sys
work, n, speed, cpu, run, steps, rc = sys.argv[1:]
steps = int(steps)
def stat(path):
    return dict(l.split() for l in open(path) if len(l.split()) == 2)
before, after = stat(f"{work}/before"), stat(f"{work}/after")
rows = list(csv.DictReader(open(f"{work}/log.csv"))) if os.path.exists(f"{work}/log.csv") else []
timed = rows[1:]
seconds = sum(float(r["seconds"]) for r in timed)
line = {"hosts": int(n), "speed": speed, "cpu": float(cpu), "run": int(run), "failed": int(rc) != 0 or not timed,
        "ms_per_step": 1e3 * seconds / (steps * len(timed)) if timed else None,
        "mpi_share": sum(float(r["mpi_seconds"]) for r in timed) / seconds if timed and seconds else None,
        "throttled_periods": int(after["nr_throttled"]) - int(before["nr_throttled"]),
        "periods": int(after["nr_periods"]) - int(before["nr_periods"]),
        "val_accuracy": float(rows[-1]["val_accuracy"]) if rows else None}
if line["failed"]:
    line["tail"] = open(f"{work}/out").read()[-400:]
print(json.dumps(line))
PY
}

for speed in ${speeds//,/ }; do
  cpu=$(share_of "$speed")
  make_profile_cluster "$hosts" "$profile"
  for run in $(seq "$rounds"); do
    run_once 1 "$speed" "$run"
    run_once "$hosts" "$speed" "$run"
  done
  teardown
done

echo "$hosts emulated hosts against 1, $profile, $model batch $batch a rank, $epochs epochs of $images images (the first not timed), train $train_args; CPU: $(lscpu | sed -n 's/^Model name: *//p')"
python3 - "$out" "$hosts" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
hosts = int(sys.argv[2])
print(f"\n| host speed | core a host | ms a step, 1 host | ms a step, {hosts} hosts | ratio | throttled periods, 1 / {hosts} hosts | failed |")
print("|---|---|---|---|---|---|---|")
for speed in dict.fromkeys(r["speed"] for r in runs):
    of = lambda n: [r for r in runs if r["speed"] == speed and r["hosts"] == n and not r["failed"]]
    med = lambda rs, k: statistics.median(r[k] for r in rs) if rs else float("nan")
    one, many = of(1), of(hosts)
    failed = sum(r["failed"] for r in runs if r["speed"] == speed)
    thr = lambda rs: f"{med(rs, 'throttled_periods') / max(med(rs, 'periods'), 1):.0%}"
    ratio = med(many, "ms_per_step") / med(one, "ms_per_step") if one and many else float("nan")
    print(f"| {speed} | {runs[[r['speed'] for r in runs].index(speed)]['cpu']:.3f} | {med(one, 'ms_per_step'):.2f} "
          f"| {med(many, 'ms_per_step'):.2f} | {ratio:.2f}x | {thr(one)} / {thr(many)} | {failed} |")
PY
