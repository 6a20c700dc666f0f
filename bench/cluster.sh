#!/usr/bin/env bash
# Cluster benchmark: 1 host against N hosts, pitrain and the PyTorch DDP peer side by side, on
# emulated hosts (root only) or on a real cluster (--hostfile). Measures time to a target
# validation accuracy, ms/step, images/s and the MPI share; writes a CSV, a Markdown table and a
# PNG plot (validation accuracy against training time) into --out.
#
# Emulation (see ../shared/DESIGN.md): one network namespace per host, veths into a bridge in a
# namespace of its own, each host's link shaped with tc tbf in both directions, a cgroup-v1 CPU
# quota per host (by default a Raspberry Pi 4's compute rate: --host-speed), Open MPI launched
# into the namespaces through bench/netns_rsh.sh. Links are
# ~10 us one way, not a Pi's 0.1-5 ms, unless --latency adds some (this kernel has no netem: a
# program of ours, bench/netns_delay.cpp, holds each host's outgoing frames). A host's
# quota runs it 5 ms of every 10 and then stops it, which no Pi does: hosts with short steps
# (mlp: ~11 steps a period) drift apart by several steps between rounds and wait for each
# other at the next.
#
# Needs (Debian): iproute2, gnuplot-nox for the plot, python3-torch python3-h5py for the peer.
# usage: bench/cluster.sh [options]
#   --profiles LIST   wlan (20 Mbit/s full duplex a host), wlan-cell (one 20 Mbit/s cell that all
#                     hosts share, every frame crossing it twice), ethernet (100), gigabit (1000),
#                     or RATEmbit; default wlan, ethernet, gigabit
#   --hosts N         hosts of the multi-host runs (default 4)
#   --host-speed B    each emulated host computes at board B's rate: pi3b+, pi4 (default) or pi5,
#                     from this machine's measured single-core fp32 GEMM rate (bench/netns_cluster.sh
#                     has the boards' figures, estimates from public Linpack results)
#   --cpu F           cores per emulated host instead, a raw share of this machine
#   --latency MS      added to every frame a host sends (default 0; a WLAN adds 1-5 ms a message)
#   --models LIST     cnn,mlp (default); cnn runs batch 32 a rank, mlp the magazine's batch 8
#   --target A        validation accuracy to reach (default 0.80); the time to it is interpolated
#                     between validations on the job's clock (pitrain's wall_seconds: start-up
#                     included, validation not; the peer's epochs, its start-up not counted)
#   --images N        training images per run (default 96000)
#   --eval-images N   images between validations (default 9600)
#   --max-seconds S   stop a run after S seconds; its curve so far still counts (default 150); a run
#                     that fails otherwise counts as failed ("failed" in summary.jsonl), its curve not
#   --repeat R        run every configuration R times, alternating; the table gives medians (default 1)
#   --no-peer         skip the PyTorch peer
#   --hostfile FILE   real cluster: no emulation; runs 1 host (the first) and all of them
#   --mpirun-args S   extra mpirun arguments (e.g. --tune mpi_hostfiles/slow-links.conf)
#   --train-args S    extra `pitrain train` arguments (e.g. --sync auto, or --sync local-sgd --sync-every 8 --grad-dtype fp16)
#   --peer-args S     extra arguments of the peer (e.g. --powersgd 4; its hooks act on 2+ hosts only)
#   --out DIR         results folder (default bench/results-cluster)
#   --smoke           2 hosts, one profile, a few steps: checks that everything runs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
peer=${PEER:-$root/../shared/peers/torch_ddp.py}
profiles=wlan,ethernet,gigabit hosts=4 host_speed=pi4 cpu="" latency=0 models=cnn,mlp target=0.80 images=96000 eval_images=9600 max_seconds=150
use_peer=1 hostfile="" extra="" train_extra="" peer_extra="" out=$root/bench/results-cluster repeat=1
while [ $# -gt 0 ]; do
  case $1 in
    --profiles) profiles=$2; shift ;;
    --hosts) hosts=$2; shift ;;
    --host-speed) host_speed=$2 cpu=""; shift ;;
    --cpu) cpu=$2 host_speed=""; shift ;;
    --latency) latency=$2; shift ;;
    --models) models=$2; shift ;;
    --target) target=$2; shift ;;
    --images) images=$2; shift ;;
    --eval-images) eval_images=$2; shift ;;
    --max-seconds) max_seconds=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --no-peer) use_peer=0 ;;
    --hostfile) hostfile=$2; shift ;;
    --mpirun-args) extra=$2; shift ;;
    --train-args) train_extra=$2; shift ;;
    --peer-args) peer_extra=$2; shift ;;
    --out) out=$2; shift ;;
    --smoke) hosts=2 profiles=ethernet models=mlp images=2048 eval_images=1024 use_peer=0 ;;
    *) echo "bench/cluster.sh: unknown option $1 (see the header of this script)" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=bench/netns_cluster.sh
. "$root/bench/netns_cluster.sh"
latency_us=$(latency_micros "$latency")
if [ -n "$host_speed" ] && [ -z "$hostfile" ]; then
  cpu=$(host_speed_cpu "$host_speed" "$build") || exit 2
fi
mkdir -p "$out/logs"  # every run's output: $out/logs/TRAINER-MODEL-PROFILE-HOSTS-RUN.log
work=$(mktemp -d /tmp/pitrain-cluster-XXXXXX)
trap 'teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- one training run -------------------------------------------------------------------------
# launch N HOSTFILE COMMAND...: mpirun over the first N hosts, in the head namespace if emulated;
# its exit status, 124 when stopped after --max-seconds (timeout's).
launch() {
  local n=$1 hf=$2
  shift 2
  if [ -z "$hostfile" ]; then
    # shellcheck disable=SC2086
    emulated_mpirun "$max_seconds" -np "$n" --hostfile "$hf" -x MASTER_ADDR="$net.11" -x GLOO_SOCKET_IFNAME=eth0 $extra "$@"
  else
    # shellcheck disable=SC2086
    timeout --foreground "$max_seconds" mpirun -np "$n" --hostfile "$hf" "${one_rank_a_host[@]}" \
      -x MASTER_ADDR="$(awk '!/^#/ && NF {print $1; exit}' "$hf")" $extra "$@" </dev/null
  fi || {
    local rc=$?
    if [ "$rc" -eq 124 ]; then
      echo "  stopped after ${max_seconds}s: keeping the curve so far" >&2
    else
      echo "  failed (exit $rc): the run counts as failed" >&2
    fi
    return "$rc"
  }
}

csv=$out/cluster.csv
# seconds: the job's clock at each validation (pitrain's wall_seconds; the peer's epochs added
# up); start_seconds: where it stood at the first step (pitrain's start-up; the peer's 0).
echo "trainer,model,profile,hosts,run,epoch,seconds,val_accuracy,mpi_seconds,start_seconds" >"$csv"
summary=$work/summary.jsonl  # copied into --out at the end, for bench/cluster_report.py
: >"$summary"

# run_config TRAINER MODEL PROFILE N HOSTFILE RUN: appends the curve to the CSV, a summary line.
run_config() {
  local trainer=$1 model=$2 profile=$3 n=$4 hf=$5 run=$6 batch=32 log=$out/logs/$1-$2-$3-$4-$6.log
  [ "$model" = mlp ] && batch=8
  local steps=$((eval_images / (n * batch))) epochs
  [ "$steps" -ge 1 ] || steps=1
  epochs=$(((images + eval_images - 1) / eval_images))
  local common=(--data "$work/d.h5" --model "$model" --batch-size "$batch" --threads 1 --epochs "$epochs"
    --steps-per-epoch "$steps")
  echo "run $run: $trainer $model $profile $n host(s): $epochs x $steps steps of $batch a rank" >&2
  local rc=0
  if [ "$trainer" = pitrain ]; then
    local attempt
    for attempt in 1 2 3; do
      rm -f "$work/log.csv"
      rc=0
      # shellcheck disable=SC2086
      # A stalled step ends the run with the ranks that had not arrived named in its log.
      launch "$n" "$hf" "$build/pitrain" train "${common[@]}" --stall-timeout 30 $train_extra --log "$work/log.csv" \
        >"$log" 2>&1 || rc=$?
      [ "$rc" -eq 124 ] || break
      if grep -q "^pitrain: $n rank" "$log"; then  # say how far it got
        echo "  run $run stopped during training ($log)" >&2
        break
      fi
      # The emulated launcher now and then leaves a host's orted unstarted, at times twice in a
      # row: a run that never started training is started again, up to three times, as
      # bench/cluster_ab.sh does.
      echo "  run $run stopped before training started: MPI start-up or data loading ($log)" >&2
    done
  else
    # shellcheck disable=SC2086
    launch "$n" "$hf" /usr/bin/python3 "$peer" "${common[@]}" $peer_extra >/dev/null 2>"$work/peer.log" || rc=$?
    cp "$work/peer.log" "$log"
  fi
  python3 - "$trainer" "$model" "$profile" "$n" "$steps" "$batch" "$work" "$csv" "$summary" "$run" "$rc" <<'PY'
import csv, json, os, re, sys
trainer, model, profile, n, steps, batch, work, out, summary, run, rc = sys.argv[1:]
n, steps, batch = int(n), int(steps), int(batch)
failed = int(rc) not in (0, 124)  # 124: stopped at --max-seconds, the curve so far counts
epochs = []  # (epoch, seconds, val_accuracy, mpi_seconds or None, job seconds so far)
if trainer == "pitrain":
    if os.path.exists(f"{work}/log.csv"):
        for r in csv.DictReader(open(f"{work}/log.csv")):
            epochs.append((int(r["epoch"]), float(r["seconds"]), float(r["val_accuracy"]), float(r["mpi_seconds"]),
                           float(r["wall_seconds"])))
        os.remove(f"{work}/log.csv")
else:
    wall = 0.0
    for m in re.finditer(r"epoch (\d+)/\d+: \d+ steps ([\d.]+)s .* val_acc=([\d.]+)", open(f"{work}/peer.log").read()):
        wall += float(m.group(2))
        epochs.append((int(m.group(1)), float(m.group(2)), float(m.group(3)), None, wall))
if failed:
    epochs = []
t = sum(e[1] for e in epochs)  # training seconds, for ms/step and images/s
start = epochs[0][4] - epochs[0][1] if epochs else 0.0
with open(out, "a") as f:
    for e, sec, acc, mpi, wall in epochs:
        f.write(f"{trainer},{model},{profile},{n},{run},{e},{wall:.3f},{acc},{'' if mpi is None else mpi},{start:.3f}\n")
total_steps = steps * len(epochs)
mpi = sum(e[3] for e in epochs) if epochs and epochs[0][3] is not None else None
with open(summary, "a") as f:
    f.write(json.dumps({"trainer": trainer, "model": model, "profile": profile, "hosts": n, "run": int(run),
                        "ms_per_step": 1e3 * t / total_steps if total_steps else float("nan"),
                        "images_per_second": n * batch * total_steps / t if t else float("nan"),
                        "mpi_share": mpi / t if mpi is not None and t else None, "failed": failed}) + "\n")
PY
}

# --- data, then every configuration -----------------------------------------------------------
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
prepare_bench_data "$build" "$root" "$work/d.h5"
trainers=pitrain
if [ "$use_peer" = 1 ]; then
  require_peer "$peer"
  trainers="pitrain peer"
fi
if [ -n "$hostfile" ]; then
  total=$(awk '!/^#/ && NF' "$hostfile" | wc -l)
  awk '!/^#/ && NF {print; exit}' "$hostfile" >"$work/one"
  profiles=real
fi
export OMPI_MCA_rmaps_base_oversubscribe=1
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for profile in ${profiles//,/ }; do
  if [ -z "$hostfile" ]; then
    [ "$(id -u)" -eq 0 ] || { echo "bench/cluster.sh: the emulation needs root (or use --hostfile)" >&2; exit 2; }
    make_profile_cluster "$hosts" "$profile"
    emulated_hostfile 1 >"$work/one"
    emulated_hostfile "$hosts" >"$work/all"
    total=$hosts
  else
    cp "$hostfile" "$work/all"
  fi
  for model in ${models//,/ }; do
    for run in $(seq "$repeat"); do
      for trainer in $trainers; do
        run_config "$trainer" "$model" "$profile" 1 "$work/one" "$run"
        run_config "$trainer" "$model" "$profile" "$total" "$work/all" "$run"
      done
    done
  done
  [ -z "$hostfile" ] && teardown
done

# --- table and plot ---------------------------------------------------------------------------
cp "$summary" "$out/summary.jsonl"
hosts_text="$cpu core a host"
[ -z "$host_speed" ] || hosts_text="hosts at $host_speed speed ($cpu core of this machine)"
[ -z "$hostfile" ] || hosts_text="the hosts of $hostfile"
python3 "$root/bench/cluster_report.py" "$out" "$target" "$hosts_text" "$latency_us" "$bench_data" "$bench_classes"
cat "$out/cluster.md"
