#!/usr/bin/env bash
# A/B of ways to train on the emulated hosts: the multi-host runs only, on one emulated cluster,
# the variants alternating round by round, so that a slower minute of the machine falls on all
# of them alike (bench/cluster.sh also runs one host each time and sets the cluster up anew for
# every profile). For each run: ms a step (training time over steps), the MPI share, the
# validation accuracy after each epoch and what --sync auto chose. Root only.
# usage: bench/cluster_ab.sh [--profile P] [--latency MS] [--host-speed B | --cpu F] [--model cnn|mlp] [--hosts N]
#                            [--rounds R] [--epochs E] [--target ACC] "NAME|BUILD_DIR|TRAIN ARGS" ...
#   --profile  wlan, wlan-cell, ethernet, gigabit or RATEmbit as in bench/cluster.sh (default wlan)
#   --latency  milliseconds added to every frame a host sends, as in bench/cluster.sh (default 0)
#   --host-speed, --cpu  as in bench/cluster.sh (default pi4)
#   --model    cnn at batch 32 a rank (default), mlp at 8; epochs of 9,600 and 3,200 images
#   --rounds   runs of every variant (default 5); --epochs per run (default 4)
#   --target   also the job's seconds to this validation accuracy, as bench/cluster.sh gives them
# e.g. bench/cluster_ab.sh --profile wlan "before|/tmp/old/build|--sync auto" "after|build|--sync auto"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
profile=wlan model=cnn hosts=4 rounds=5 epochs=4 host_speed=pi4 cpu="" latency=0 target=
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    --host-speed) host_speed=$2 cpu=""; shift 2 ;;
    --cpu) cpu=$2 host_speed=""; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    -*) echo "bench/cluster_ab.sh: unknown option $1 (see the header of this script)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "bench/cluster_ab.sh: give at least one \"NAME|BUILD_DIR|TRAIN ARGS\"" >&2; exit 2; }
batch=32 images=9600
[ "$model" = mlp ] && batch=8 images=3200
steps=$((images / (hosts * batch)))
# shellcheck source=bench/netns_cluster.sh
. "$root/bench/netns_cluster.sh"
latency_us=$(latency_micros "$latency")
emulation_available || exit 0
[ -z "$host_speed" ] || cpu=$(host_speed_cpu "$host_speed" "$root/build") || exit 2
work=$(mktemp -d /tmp/pitrain-cluster-ab-XXXXXX)
trap 'teardown; rm -rf "$work"' EXIT
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
prepare_bench_data "$root/build" "$root" "$work/d.h5"
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PITRAIN_BENCH=$root/bench
make_profile_cluster "$hosts" "$profile"
emulated_hostfile "$hosts" >"$work/hosts"

echo "$hosts emulated hosts, ${host_speed:+$host_speed speed, }$cpu core each, $profile, $latency ms added a frame; $model, batch $batch a rank, $epochs epochs of $steps steps; data: $bench_data"
echo
echo "| round | variant | ms/step | s to ${target:-no target} | MPI share | val acc after each epoch | --sync auto's choice |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  for variant in "$@"; do
    IFS='|' read -r name build train_args <<<"$variant"
    # The emulated launcher now and then leaves a host's daemon unstarted (bench/cluster.sh):
    # such a run ends at the timeout without a log and is started again. Any other non-zero exit
    # (the timeout included: a run is meant to finish) fails the run, whatever rows it logged.
    for _ in 1 2 3; do
      rm -f "$work/log.csv"
      rc=0
      # shellcheck disable=SC2086
      emulated_mpirun 120 -np "$hosts" --hostfile "$work/hosts" \
        "$build/pitrain" train --data "$work/d.h5" --model "$model" --batch-size "$batch" --threads 1 \
        --epochs "$epochs" --steps-per-epoch "$steps" --log "$work/log.csv" $train_args >"$work/out" 2>&1 || rc=$?
      [ -f "$work/log.csv" ] && break
    done
    python3 - "$work" "$round" "$name" "$steps" "$target" "$rc" "$bench_classes" <<'PY'
import csv, os, re, sys
sys.path.insert(0, os.environ["PITRAIN_BENCH"])
from time_to_target import time_to_target
work, round_, name, steps, target, rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
chance = 1 / int(sys.argv[7])
out = open(f"{work}/out").read()
rows = list(csv.DictReader(open(f"{work}/log.csv"))) if os.path.exists(f"{work}/log.csv") else []
if rc != 0 or not rows:  # kept out of the medians, but counted there as failed
    with open(f"{work}/ms.txt", "a") as f:
        f.write(f"{name}\tfailed\t\n")
    last = out.strip().splitlines()[-1] if out.strip() else "no output"
    print(f"| {round_} | {name} | failed (exit {rc}, {len(rows)} epochs logged): {last} | | | | |")
    sys.exit()
seconds = sum(float(r["seconds"]) for r in rows)
mpi = sum(float(r["mpi_seconds"]) for r in rows)
choice = re.search(r"^sync auto: (.*?) \(", out, re.M)
algorithm = re.search(r"rounds by (.*?) allreduce", out)
choice = (choice.group(1) if choice else "") + (f", by {algorithm.group(1)}" if algorithm else "")
ms = 1e3 * seconds / (steps * len(rows))
to_target = ""
if target:
    start = float(rows[0]["wall_seconds"]) - float(rows[0]["seconds"])
    t = time_to_target([(float(r["wall_seconds"]), float(r["val_accuracy"])) for r in rows], float(target), start, chance)
    to_target = f"{t:.2f}" if t < float("inf") else ""
with open(f"{work}/ms.txt", "a") as f:
    f.write(f"{name}\t{ms}\t{to_target}\n")
print(f"| {round_} | {name} | {ms:.2f} | {to_target or '-'} | {100 * mpi / seconds:.0f} % | "
      + " / ".join(f"{float(r['val_accuracy']):.3f}" for r in rows) + f" | {choice} |")
PY
  done
done
echo
python3 - "$work/ms.txt" <<'PY'
import statistics, sys
runs, to_target, failed = {}, {}, {}
for line in open(sys.argv[1]):
    name, ms, seconds = line.rstrip("\n").split("\t")
    runs.setdefault(name, [])
    to_target.setdefault(name, [])
    failed[name] = failed.get(name, 0) + (ms == "failed")
    if ms != "failed":
        runs[name].append(float(ms))
        to_target[name].append(float(seconds) if seconds else float("inf"))
def target(name):  # a run that never reached it counts as the slowest
    if not any(s < float("inf") for s in to_target[name]):
        return ""
    return f", {statistics.median(to_target[name]):.2f} s to the target"
def median(name):
    if not runs[name]:
        return f"{name}: all {failed[name]} runs failed"
    lost = f", {failed[name]} failed" if failed[name] else ""
    return f"{name} {statistics.median(runs[name]):.2f} ms/step{target(name)} ({len(runs[name])} runs{lost})"
print("Medians: " + "; ".join(median(name) for name in runs))
PY
