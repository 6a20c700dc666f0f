#!/usr/bin/env bash
# Cluster benchmark: 1 host against N hosts, pitrain and the PyTorch DDP peer side by side, on
# real hosts (--hostfile) or on emulated ones (root only). Measures the time to a target
# validation accuracy, the whole job, ms/step, images/s and the MPI share, and writes one --out
# folder: the Markdown table (cluster.md), the curves of all runs (cluster.csv, summary.jsonl),
# each run's output and --log CSV (logs/), a PNG plot of validation accuracy against the job's
# seconds (cluster.png) and hosts.md (each host's CPU, cores, memory, kernel, network links and
# pitrain --version).
#
# Real hosts, such as four Raspberry Pis: on the first host of the hostfile, once
# mpi_hostfiles/setup_hosts.sh HOSTFILE has built pitrain on every host (no shared filesystem
# needed; ssh, or --rsh, must reach every host without a password, as for mpirun):
#   bench/cluster.sh --hostfile mpi_hostfiles/pis --magazine --target-share 0.95 --no-peer
# First it checks that every host runs this machine's pitrain build (`pitrain --version`: the
# version, the source revision and the build options) and stops with a line naming a host that
# does not. Then it stages the data on every host at the same absolute path (bench/data/NAME.h5
# of the source tree, which setup_hosts.sh puts at the same path everywhere, or --data's path):
# rsync --checksum copies it where a host's copy differs or is missing, and says per host which
# it did. It runs 1 host (the hostfile's first) and all of them, one rank a host with as many
# threads as the first host has cores, and copies rank 0's --log back from the first host.
#
# The clock: a run's time is the job's, from the moment just before mpirun starts (passed to
# the ranks as PITRAIN_JOB_START, from which pitrain's --log wall_seconds count: start-up
# included, validation excluded) to the validation that reaches the target. The table gives the
# crossing interpolated between validations, the first validation at or above the target (what
# a user watching sees) and the whole job timed from outside (mpirun's start to its exit).
# Launches that never reach training are started again (up to three times) and listed with
# their seconds. The peer's times are its epochs added up: its start-up is not counted, and the
# table says so beside them.
#
# Emulation (see ../shared/DESIGN.md): one network namespace per host, veths into a bridge in a
# namespace of its own, each host's link shaped with tc tbf in both directions, a cgroup-v1 CPU
# quota per host (by default a Raspberry Pi 4's compute rate: --host-speed), Open MPI launched
# into the namespaces through bench/netns_rsh.sh. Links are ~10 us one way, not a real LAN's
# (about 0.1 ms a message wired, 1-5 ms over WLAN), unless --latency adds some (this kernel has
# no netem: a program of ours, bench/netns_delay.cpp, holds each host's outgoing frames). A
# host's quota runs it 5 ms of every 10 and then stops it, which no Pi does: hosts with short
# steps (mlp: ~11 steps a period) drift apart by several steps between rounds and wait for each
# other at the next.
#
# Needs (Debian): rsync for --hostfile, iproute2 for the emulation, gnuplot-nox for the plot,
# python3-torch python3-h5py for the peer.
# usage: bench/cluster.sh [options]
#   --hostfile FILE   real hosts: no emulation; runs 1 host (the first) and all of them
#   --rsh CMD         with --hostfile: the ssh command of rsync -e, mpirun's plm_rsh_agent and
#                     the checks (default ssh), e.g. "ssh -p 2222"
#   --magazine        the magazine's experiment: mlp, batch 8 a rank, 32 epochs of 256 steps a
#                     rank, on 1 host, on all hosts averaging every step (--sync per-step) and on
#                     all hosts with --sync auto; on datasets/quickdraw.h5 (its 13 classes, README
#                     step 5) when it is there and --data names no other; --max-seconds 1800
#                     unless given
#   --data FILE       train on FILE (from `pitrain prepare`), staged at its own path, instead of
#                     the 15 Quick Draw classes of ../shared/quickdraw (else Fashion-MNIST)
#   --profiles LIST   wlan (20 Mbit/s full duplex a host), wlan-cell (one 20 Mbit/s cell that all
#                     hosts share, every frame crossing it twice), ethernet (100), gigabit (1000),
#                     or RATEmbit; default wlan, ethernet, gigabit
#   --hosts N         hosts of the multi-host runs (default 4)
#   --host-speed B    each emulated host computes at board B's rate: pi3b+, pi4 (default) or pi5,
#                     from this machine's measured single-core fp32 GEMM rate (bench/netns_cluster.sh
#                     has the boards' figures, estimates from public Linpack results)
#   --cpu F           cores per emulated host instead, a raw share of this machine
#   --latency MS      added to every frame a host sends (default 0; a wired LAN adds about 0.1 ms
#                     a message, a WLAN 1-5 ms)
#   --models LIST     cnn,mlp (default); cnn runs batch 32 a rank, mlp the magazine's batch 8
#   --target A        validation accuracy to reach (default 0.80)
#   --target-share F  instead, F times the final validation accuracy of pitrain's 1-host run
#                     (the median over --repeat) of the same model and link, e.g. 0.95: for data
#                     whose reachable accuracy is not known, such as the magazine's 13 classes
#   --images N        training images per run (default 96000)
#   --eval-images N   images between validations (default 9600)
#   --max-seconds S   stop a run after S seconds; its curve so far still counts (default 150); a run
#                     that fails otherwise counts as failed ("failed" in summary.jsonl), its curve not
#   --repeat R        run every configuration R times, alternating; the table gives medians (default 1)
#   --no-peer         skip the PyTorch peer
#   --mpirun-args S   extra mpirun arguments (e.g. "--tune $PWD/mpi_hostfiles/slow-links.conf": an
#                     absolute path, docs/slow-links.md)
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
rsh=ssh data="" target_share="" magazine=0 smoke=0 max_seconds_given=""
fail() { echo "bench/cluster.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --profiles|--hosts|--host-speed|--cpu|--latency|--models|--target|--target-share|--images|--eval-images|\
    --max-seconds|--repeat|--hostfile|--rsh|--data|--mpirun-args|--train-args|--peer-args|--out)
      [ $# -ge 2 ] || fail "$1 needs a value (see the header of this script)" ;;&
    --profiles) profiles=$2; shift ;;
    --hosts) hosts=$2; shift ;;
    --host-speed) host_speed=$2 cpu=""; shift ;;
    --cpu) cpu=$2 host_speed=""; shift ;;
    --latency) latency=$2; shift ;;
    --models) models=$2; shift ;;
    --target) target=$2 target_share=""; shift ;;
    --target-share) target_share=$2; shift ;;
    --images) images=$2; shift ;;
    --eval-images) eval_images=$2; shift ;;
    --max-seconds) max_seconds=$2 max_seconds_given=1; shift ;;
    --repeat) repeat=$2; shift ;;
    --no-peer) use_peer=0 ;;
    --hostfile) hostfile=$2; shift ;;
    --rsh) rsh=$2; shift ;;
    --data) data=$2; shift ;;
    --magazine) magazine=1 models=mlp ;;
    --mpirun-args) extra=$2; shift ;;
    --train-args) train_extra=$2; shift ;;
    --peer-args) peer_extra=$2; shift ;;
    --out) out=$2; shift ;;
    --smoke) smoke=1 hosts=2 profiles=ethernet models=mlp images=2048 eval_images=1024 use_peer=0 ;;
    *) fail "unknown option $1 (see the header of this script)" ;;
  esac
  shift
done
[[ $target =~ ^0?[.][0-9]+$ ]] || fail "--target $target: give a validation accuracy between 0 and 1, e.g. 0.8"
[ -z "$target_share" ] || [[ $target_share =~ ^(0?[.][0-9]*[1-9][0-9]*|1([.]0*)?)$ ]] ||
  fail "--target-share $target_share: give a share of one host's final accuracy, above 0 and at most 1, e.g. 0.95"
[ -z "$hostfile" ] || [ -f "$hostfile" ] || fail "--hostfile $hostfile: no such file"
# The sync of the multi-host pitrain runs, for the table: --train-args' --sync, or pitrain's default.
default_sync=per-step
if [[ " $train_extra " =~ [[:space:]]--sync[=[:space:]]+([^[:space:]]+) ]]; then default_sync=${BASH_REMATCH[1]}; fi
if [ "$magazine" = 1 ]; then
  if [[ " $train_extra " =~ [[:space:]]--sync[=[:space:]] ]]; then
    fail "--magazine runs --sync per-step and --sync auto itself: leave --sync out of --train-args"
  fi
  [ -n "$max_seconds_given" ] || max_seconds=1800
  [ -n "$data" ] || [ ! -f "$root/datasets/quickdraw.h5" ] || data=$root/datasets/quickdraw.h5
  mag_epochs=32 mag_steps=256  # a rank's, whatever the number of hosts, as in the magazine
  [ "$smoke" = 0 ] || mag_epochs=2 mag_steps=16
fi
if [ -n "$data" ]; then
  [ -f "$data" ] || fail "--data $data: no such file; make one with pitrain prepare (or datasets/download_quickdraw.sh)"
  data=$(cd "$(dirname "$data")" && pwd)/$(basename "$data")  # the same absolute path on every host
fi
mkdir -p "$out/logs"  # every run's output and --log: $out/logs/TRAINER-MODEL-PROFILE-HOSTS[-SYNC]-RUN.*
out=$(cd "$out" && pwd)  # absolute: rank 0 writes its --log at this path on its host
# shellcheck source=bench/netns_cluster.sh
. "$root/bench/netns_cluster.sh"
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
latency_us=$(latency_micros "$latency")
if [ -n "$host_speed" ] && [ -z "$hostfile" ]; then
  cpu=$(host_speed_cpu "$host_speed" "$build") || exit 2
fi
work=$(mktemp -d /tmp/pitrain-cluster-XXXXXX)
partial=""  # data being prepared into bench/data/, removed if the run ends before it is whole
trap 'teardown; rm -rf "$work" ${partial:+"$partial"}' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
read -ra rsh_cmd <<<"$rsh"

# --- real hosts: who they are, their builds, the data on each, hosts.md ------------------------
# refuse MESSAGE: the one line that stops the benchmark before any run.
refuse() { echo "bench/cluster.sh: $*" >&2; exit 1; }

# remote HOST COMMAND: one shell command line on HOST through --rsh, without input.
remote() { "${rsh_cmd[@]}" -- "$1" "$2" </dev/null; }

# shellcheck source=mpi_hostfiles/hostfile.sh
. "$root/mpi_hostfiles/hostfile.sh"

# check_builds: every host runs this machine's pitrain build, or a line naming the first that
# does not and the fix.
check_builds() {
  local mine theirs host rc
  mine=$("$build/pitrain" --version) || fail "no pitrain at $build/pitrain: build it (meson compile -C build) or set BUILD"
  for host in "${hostfile_hosts[@]}"; do
    # ssh's own words (a new host key, say) go to stderr, apart from the version line; ssh
    # exits 255 where it cannot reach the host.
    rc=0
    theirs=$(remote "$host" "$(printf %q "$build/pitrain") --version" 2>"$work/rsh.err") || rc=$?
    [ "$rc" -ne 255 ] ||
      refuse "cannot reach $host through $rsh ($(tail -n 1 "$work/rsh.err")): check that '$rsh $host hostname' works without a password"
    [ "$rc" -eq 0 ] ||
      refuse "$host cannot run $build/pitrain ($(tail -n 1 "$work/rsh.err")): run mpi_hostfiles/setup_hosts.sh $hostfile${rsh_flag:-} again"
    [ "$(build_of "$theirs")" = "$(build_of "$mine")" ] ||
      refuse "$host runs another pitrain build ($(build_of "$theirs"); this machine: $(build_of "$mine")): run mpi_hostfiles/setup_hosts.sh $hostfile${rsh_flag:-} again"
  done
  echo "builds: every host runs $(build_of "$mine")" >&2
}

# stage_data FILE: FILE at the same path on every host. rsync --checksum copies it where the
# host's copy differs or is missing and leaves the others; says per host which it did.
declare -A staged  # host -> what staging did there, for hosts.md
stage_data() {
  local file=$1 host changes
  for host in "${hostfile_hosts[@]}"; do
    remote "$host" "mkdir -p $(printf %q "$(dirname "$file")")" ||
      refuse "$host: cannot make $(dirname "$file") there: check '$rsh $host' and the folder's owner"
    changes=$(rsync -a --checksum --itemize-changes -e "$rsh" "$file" "$host:$file") ||
      refuse "$host: rsync of $file failed: install rsync here, and run mpi_hostfiles/setup_hosts.sh $hostfile${rsh_flag:-} (it installs rsync there)"
    if grep -q '^[<>]f' <<<"$changes"; then staged[$host]="copied"; else staged[$host]="already there (same checksum)"; fi
    echo "data on $host: ${staged[$host]}: $file" >&2
  done
}

# What hosts.md says of a host, run there by sh with pitrain's path as $1; one line, tab-separated:
# the CPU (and the board, where the device tree names it), cores, memory, kernel, the network
# interfaces that are up with their link speed where readable, and pitrain --version.
read -r -d '' facts_script <<'SH' || true
pitrain=$1
cpu=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
[ -n "$cpu" ] || cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
board=$(cat /sys/firmware/devicetree/base/model 2>/dev/null | tr -d '\000')
[ -z "$board" ] || cpu="$board, ${cpu:-?}"
memory=$(awk '/^MemTotal:/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo)
links=
for dev in /sys/class/net/*; do
  name=${dev##*/}
  if [ "$name" = lo ] || [ "$(cat "$dev/operstate" 2>/dev/null)" != up ]; then continue; fi
  speed=$(cat "$dev/speed" 2>/dev/null) || speed=
  if [ "${speed:-0}" -gt 0 ] 2>/dev/null; then
    speed="$speed Mbit/s"
  elif [ -d "$dev/wireless" ]; then
    speed="wireless$(iw dev "$name" link 2>/dev/null | sed -n 's/.*tx bitrate: \([0-9.]*\) MBit\/s.*/, \1 Mbit\/s now/p')"
  else
    speed="speed unreadable"
  fi
  links="${links:+$links; }$name $speed"
done
version=$("$pitrain" --version 2>&1) || version="no pitrain at $pitrain"
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "${cpu:-?}" "$(nproc)" "${memory:-?}" "$(uname -sr)" "${links:-none up}" "$version"
SH

# facts_row NAME [HOST]: hosts.md's row of HOST (through --rsh), or of this machine, without
# its end.
facts_row() {
  local facts
  if [ -n "${2:-}" ]; then
    facts=$("${rsh_cmd[@]}" -- "$2" "sh -s -- $(printf %q "$build/pitrain")" <<<"$facts_script") || facts="?"
  else
    facts=$(sh -s -- "$build/pitrain" <<<"$facts_script") || facts="?"
  fi
  echo "| $1 | $(sed 's/|/\//g; s/\t/ | /g' <<<"$facts") |"
}

# write_hosts_md: hosts.md in --out: the hosts the runs ran on, or this machine under emulation.
write_hosts_md() {
  local host
  {
    if [ -n "$hostfile" ]; then
      echo "Hosts of $hostfile (gathered through $rsh; data: $data_file)"
      echo
      echo "| host | CPU | cores | memory | kernel | network (up, link speed) | pitrain --version | data |"
      echo "|---|---|---|---|---|---|---|---|"
      for host in "${hostfile_hosts[@]}"; do echo "$(facts_row "$host" "$host") ${staged[$host]:-not staged} |"; done
    else
      echo "Emulated hosts: network namespaces on this machine, $hosts_text (data: $bench_data)"
      echo
      echo "| machine | CPU | cores | memory | kernel | network (up, link speed) | pitrain --version |"
      echo "|---|---|---|---|---|---|---|"
      facts_row "this machine ($(hostname))"
    fi
  } >"$out/hosts.md"
}

# --- one training run -------------------------------------------------------------------------
# launch N HOSTFILE COMMAND...: mpirun over the first N hosts, in the head namespace if emulated,
# with its start (now) in PITRAIN_JOB_START for the ranks; sets job_seconds to mpirun's time from
# outside. Its exit status, 124 when stopped after --max-seconds (timeout's).
launch() {
  local n=$1 hf=$2 rc=0
  shift 2
  PITRAIN_JOB_START=$(date +%s.%N)
  export PITRAIN_JOB_START
  if [ -z "$hostfile" ]; then
    # shellcheck disable=SC2086
    emulated_mpirun "$max_seconds" -np "$n" --hostfile "$hf" -x PITRAIN_JOB_START -x MASTER_ADDR="$net.11" \
      -x GLOO_SOCKET_IFNAME=eth0 $extra "$@" || rc=$?
  else
    # shellcheck disable=SC2086
    timeout --foreground "$max_seconds" mpirun -np "$n" --hostfile "$hf" "${one_rank_a_host[@]}" --mca plm_rsh_agent "$rsh" \
      -x PITRAIN_JOB_START -x MASTER_ADDR="$(awk '!/^#/ && NF {print $1; exit}' "$hf")" $extra "$@" </dev/null || rc=$?
  fi
  job_seconds=$(awk -v start="$PITRAIN_JOB_START" -v end="$(date +%s.%N)" 'BEGIN { printf "%.3f", end - start }')
  if [ "$rc" -eq 124 ]; then
    echo "  stopped after ${max_seconds}s: keeping the curve so far" >&2
  elif [ "$rc" -ne 0 ]; then
    echo "  failed (exit $rc): the run counts as failed" >&2
  fi
  return "$rc"
}

# clear_log CSV: no --log CSV of an earlier run, here or on rank 0's host, which writes it.
clear_log() {
  rm -f "$1"
  [ -z "$hostfile" ] || remote "${hostfile_hosts[0]}" "mkdir -p $(printf %q "$out/logs") && rm -f $(printf %q "$1")" ||
    echo "  cannot clear $1 on ${hostfile_hosts[0]}" >&2
}

# fetch_log CSV: rank 0's --log from the hostfile's first host, where rank 0 ran (where that is
# this machine, rsync finds the file the same and leaves it).
fetch_log() {
  [ -z "$hostfile" ] || rsync -a -e "$rsh" "${hostfile_hosts[0]}:$1" "$1" 2>/dev/null || true
}

# run_pitrain N HOSTFILE LOG CSV ARG...: `pitrain train ARG...` on N hosts, its output in LOG and
# its --log in CSV. A launch that never reached training is started again, up to three times in
# all. Sets rc, and lost to the seconds of the launches that never reached training.
run_pitrain() {
  local n=$1 hf=$2 log=$3 csvlog=$4 attempt
  shift 4
  lost=()
  for attempt in 1 2 3; do
    clear_log "$csvlog"
    rc=0
    # A stalled step ends the run with the ranks that had not arrived named in its log.
    # shellcheck disable=SC2086
    launch "$n" "$hf" "$build/pitrain" train "$@" --stall-timeout 30 $train_extra --log "$csvlog" >"$log" 2>&1 || rc=$?
    fetch_log "$csvlog"
    [ "$rc" -eq 124 ] || break
    if grep -q "^pitrain: $n rank" "$log"; then  # say how far it got
      echo "  stopped during training ($log)" >&2
      break
    fi
    # The emulated launcher now and then leaves a host's orted unstarted, at times twice in a
    # row: a run that never started training is started again, as bench/cluster_ab.sh does.
    echo "  launch $attempt stopped before training started, after ${job_seconds}s: MPI start-up or data loading" \
      "(${log%.log}.launch$attempt.log)" >&2
    lost+=("$job_seconds")
    cp "$log" "${log%.log}.launch$attempt.log"
  done
}

csv=$out/cluster.csv
# seconds: the job's clock at each validation (pitrain's wall_seconds; the peer's epochs added
# up); start_seconds: where it stood at the first step (pitrain's start-up; the peer's 0).
echo "trainer,model,profile,hosts,sync,run,epoch,seconds,val_accuracy,mpi_seconds,start_seconds" >"$csv"
summary=$work/summary.jsonl  # copied into --out at the end, for bench/cluster_report.py
: >"$summary"

# run_config TRAINER MODEL PROFILE N HOSTFILE RUN SYNC [ARG...]: one run, ARGs added to the
# trainer's, SYNC its label in the table ("" on one host); appends its curve to the CSV and a
# summary line.
run_config() {
  local trainer=$1 model=$2 profile=$3 n=$4 hf=$5 run=$6 sync=$7 batch=32 steps epochs
  shift 7
  local tag=$trainer-$model-$profile-$n${sync:+-$sync}-$run
  local log=$out/logs/$tag.log csvlog=$out/logs/$tag.csv
  [ "$model" = mlp ] && batch=8
  if [ "$magazine" = 1 ]; then
    steps=$mag_steps epochs=$mag_epochs
  else
    steps=$((eval_images / (n * batch)))
    [ "$steps" -ge 1 ] || steps=1
    epochs=$(((images + eval_images - 1) / eval_images))
  fi
  local common=(--data "$data_file" --model "$model" --batch-size "$batch" --threads "$threads" --epochs "$epochs"
    --steps-per-epoch "$steps")
  echo "run $run: $trainer $model $profile $n host(s)${sync:+, $sync}: $epochs x $steps steps of $batch a rank" >&2
  rc=0 lost=() job_seconds=0
  if [ "$trainer" = pitrain ]; then
    run_pitrain "$n" "$hf" "$log" "$csvlog" "${common[@]}" "$@"
  else
    # shellcheck disable=SC2086
    launch "$n" "$hf" /usr/bin/python3 "$peer" "${common[@]}" $peer_extra "$@" >/dev/null 2>"$log" || rc=$?
  fi
  python3 - "$trainer" "$model" "$profile" "$n" "$sync" "$steps" "$batch" "$log" "$csvlog" "$csv" "$summary" "$run" \
    "$rc" "$job_seconds" "${lost[@]}" <<'PY'
import csv, json, os, re, sys
trainer, model, profile, n, sync, steps, batch, log, log_csv, out, summary, run, rc, job_seconds = sys.argv[1:15]
lost = [float(s) for s in sys.argv[15:]]
n, steps, batch = int(n), int(steps), int(batch)
failed = int(rc) not in (0, 124)  # 124: stopped at --max-seconds, the curve so far counts
epochs = []  # (epoch, seconds, val_accuracy, mpi_seconds or None, job seconds so far)
text = open(log, errors="replace").read() if os.path.exists(log) else ""
if trainer == "pitrain":
    if os.path.exists(log_csv):
        for r in csv.DictReader(open(log_csv)):
            epochs.append((int(r["epoch"]), float(r["seconds"]), float(r["val_accuracy"]), float(r["mpi_seconds"]),
                           float(r["wall_seconds"])))
else:
    wall = 0.0
    for m in re.finditer(r"epoch (\d+)/\d+: \d+ steps ([\d.]+)s .* val_acc=([\d.]+)", text):
        wall += float(m.group(2))
        epochs.append((int(m.group(1)), float(m.group(2)), float(m.group(3)), None, wall))
if failed:
    epochs = []
t = sum(e[1] for e in epochs)  # training seconds, for ms/step and images/s
start = epochs[0][4] - epochs[0][1] if epochs else 0.0
with open(out, "a") as f:
    for e, sec, acc, mpi, wall in epochs:
        f.write(f"{trainer},{model},{profile},{n},{sync},{run},{e},{wall:.3f},{acc},{'' if mpi is None else mpi},{start:.3f}\n")
total_steps = steps * len(epochs)
mpi = sum(e[3] for e in epochs) if epochs and epochs[0][3] is not None else None
classes = re.search(r" (\d+) classes", text)
with open(summary, "a") as f:
    f.write(json.dumps({"trainer": trainer, "model": model, "profile": profile, "hosts": n, "sync": sync, "run": int(run),
                        "ms_per_step": 1e3 * t / total_steps if total_steps else float("nan"),
                        "images_per_second": n * batch * total_steps / t if t else float("nan"),
                        "mpi_share": mpi / t if mpi is not None and t else None, "failed": failed,
                        "job_seconds": float(job_seconds), "lost_launches": lost,
                        "classes": int(classes.group(1)) if classes else None}) + "\n")
PY
}

# runs TRAINER MODEL PROFILE RUN: one repetition: 1 host, then all hosts; with --magazine,
# pitrain on all hosts twice: averaging every step, and with --sync auto.
runs() {
  local trainer=$1 model=$2 profile=$3 run=$4
  run_config "$trainer" "$model" "$profile" 1 "$work/one" "$run" ""
  if [ "$trainer" = peer ]; then
    run_config peer "$model" "$profile" "$total" "$work/all" "$run" ddp
  elif [ "$magazine" = 1 ]; then
    run_config pitrain "$model" "$profile" "$total" "$work/all" "$run" per-step --sync per-step
    run_config pitrain "$model" "$profile" "$total" "$work/all" "$run" auto --sync auto
  else
    run_config pitrain "$model" "$profile" "$total" "$work/all" "$run" "$default_sync"
  fi
}

# --- hosts, data, then every configuration ----------------------------------------------------
# Threads a rank: an emulated host is a share of one core; a real one trains on all its cores
# (as many as the first host has).
threads=1
if [ -n "$hostfile" ]; then
  rsh_flag=""
  [ "$rsh" = ssh ] || rsh_flag=" --rsh '$rsh'"
  read_hostfile "$hostfile"
  check_builds
  if ! threads=$(remote "${hostfile_hosts[0]}" nproc) || [[ ! $threads =~ ^[1-9][0-9]*$ ]]; then
    refuse "${hostfile_hosts[0]}: no number of cores from nproc ('$threads'): check '$rsh ${hostfile_hosts[0]} nproc'"
  fi
fi
if [ -n "$data" ]; then
  data_file=$data bench_data=$data bench_classes=""  # the classes: from the runs' banners
elif [ -n "$hostfile" ]; then
  # Prepared once, beside the source tree that setup_hosts.sh puts at the same path on every host.
  bench_data_source "$root"
  data_file=$root/bench/data/$bench_name.h5
  if [ -f "$data_file" ]; then
    echo "data: $data_file, prepared before (delete it to prepare it again)" >&2
  else
    mkdir -p "$(dirname "$data_file")"
    partial=${data_file%.h5}.partial-$$.h5
    prepare_bench_data "$build" "$root" "$partial"
    mv "$partial" "$data_file"
    partial=""
  fi
else
  data_file=$work/d.h5
  prepare_bench_data "$build" "$root" "$data_file"
fi
[ -z "$hostfile" ] || stage_data "$data_file"
trainers=pitrain
if [ "$use_peer" = 1 ]; then
  require_peer "$peer"
  trainers="pitrain peer"
fi
hosts_text="$cpu core a host"
[ -z "$host_speed" ] || hosts_text="hosts at $host_speed speed ($cpu core of this machine)"
[ -z "$hostfile" ] || hosts_text="the hosts of $hostfile (hosts.md), one rank a host with $threads threads"
write_hosts_md
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
      for trainer in $trainers; do runs "$trainer" "$model" "$profile" "$run"; done
    done
  done
  [ -z "$hostfile" ] && teardown
done

# --- table and plot ---------------------------------------------------------------------------
cp "$summary" "$out/summary.jsonl"
python3 "$root/bench/cluster_report.py" "$out" "${target_share:+share:}${target_share:-$target}" "$hosts_text" \
  "$latency_us" "$bench_data" "$bench_classes"
cat "$out/cluster.md"
