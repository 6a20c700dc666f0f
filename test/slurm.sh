#!/usr/bin/env bash
# The repository's own sbatch files on a real Slurm: Debian's slurmctld, slurmd and munge on this
# one machine (one node of its CPUs, configured here in a folder of its own), the packages of
# packages.txt's kind slurm installed first. Each sbatch file runs unchanged, with counts, data
# and epochs given on the sbatch command line, and must end COMPLETED with a checkpoint and a
# falling loss: mpirun inside the allocation, and srun with the first MPI plugin of
# `srun --mpi=list` that connects the ranks (pmix, else pmi2). A rank that fails ends the job
# FAILED with pitrain's message in its output, and so does srun --mpi=none (--expect-ranks).
# Needs root (daemons, packages); skipped (77) otherwise. Takes about a minute after the packages.
# usage: PITRAIN=build/pitrain bash test/slurm.sh
set -u
root=${PITRAIN_SOURCE:-$(cd "$(dirname "$0")/.." && pwd)}
PITRAIN=$(realpath "${PITRAIN:?set PITRAIN to the pitrain binary}")
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (Slurm's daemons)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  pkgs=$("$root/packages.sh" slurm) || exit 1
  # shellcheck disable=SC2086  # one package a word
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $pkgs; } >/tmp/pitrain-slurm-apt.log 2>&1 ||
    { tail -n 5 /tmp/pitrain-slurm-apt.log; echo "FAIL: apt-get install $pkgs"; exit 1; }
fi

work=$(mktemp -d /tmp/pitrain-slurm-XXXXXX)
daemons=()
cleanup() {
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 1
  rm -rf "$work"
}
trap cleanup EXIT
node=$(hostname -s)
cpus=$(nproc)
mkdir -p "$work/state" "$work/spool" "$work/run/build" "$work/munge"
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=pitrain-test
SlurmctldHost=$node
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
NodeName=$node CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
# munge with a key and socket of its own: the machine's munge, if any, stays as it is.
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 2>/dev/null && chmod 400 "$work/munge/munge.key"
munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed" ||
  { echo "FAIL: munged did not start"; exit 1; }
daemons+=("$(cat "$work/munge/munged.pid")")
slurmctld -D -f "$SLURM_CONF" >"$work/slurmctld.log" 2>&1 &
daemons+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/slurmd.log" 2>&1 &
daemons+=($!)
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 0.5; done
sinfo -h -o %T | grep -q idle || { echo "FAIL: the Slurm node did not come up"; tail -n 20 "$work"/slurm*.log; exit 1; }
ok "Slurm $(sinfo -V | cut -d' ' -f2): one node of $cpus CPUs"

"$PITRAIN" prepare --idx /usr/share/datasets/fashion-mnist --out "$work/run/d.h5" >/dev/null ||
  { echo "FAIL: prepare"; exit 1; }
ln -s "$(dirname "$PITRAIN")/pitrain" "$work/run/build/pitrain"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# submit SBATCH ARGS...: the job's id, after it ends (its output in $work/run/slurm-ID.out).
submit() {
  local file=$1 id
  shift
  id=$(sbatch --parsable --chdir="$work/run" --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
    --time=00:05:00 "$@" "$root/mpi_hostfiles/slurm/$file") || return 1
  for _ in $(seq 600); do
    case $(scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*') in
      JobState=PENDING | JobState=RUNNING | JobState=CONFIGURING | JobState=COMPLETING | "") sleep 0.5 ;;
      *) break ;;
    esac
  done
  echo "$id"
}
state() { scontrol show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# check_trained ID WHAT: COMPLETED, 2 ranks, a checkpoint and a falling loss.
check_trained() {
  local id=$1 what=$2 out=$work/run/slurm-$1.out
  if [ "$(state "$id")" = COMPLETED ] && grep -q "^pitrain: 2 ranks" "$out" && [ -f "$work/run/pitrain-$id.h5" ] &&
    awk '/^Epoch/ { for (i = 1; i < NF; i++) if ($i == "loss:") l[++n] = $(i + 1) } END { exit !(n >= 2 && l[n] < l[1]) }' "$out"; then
    ok "$what: job $id COMPLETED on 2 ranks, checkpoint written, loss $(grep -o 'loss: [0-9.]*' "$out" | head -n 1 | cut -d' ' -f2) -> $(grep -o ' - loss: [0-9.]*' "$out" | tail -n 1 | cut -d' ' -f4)"
  else
    fail "$what: job $id ended $(state "$id")"
    cat "$out"
  fi
}
run_args="PITRAIN_DATA=d.h5,PITRAIN_EPOCHS=2,PITRAIN_ARGS=--model mlp --steps-per-epoch 40"

id=$(submit pitrain-mpirun.sbatch --export="ALL,$run_args") || fail "sbatch pitrain-mpirun.sbatch"
[ -n "${id:-}" ] && check_trained "$id" "mpirun inside the allocation"

offered=$(srun --mpi=list 2>&1 | tr -s ' \t' '\n')
plugins=$(for p in pmix pmix_v5 pmix_v4 pmix_v3 pmi2; do grep -qx "$p" <<<"$offered" && echo "$p"; done | tr '\n' ' ')
echo "srun --mpi=list offers: $(srun --mpi=list 2>&1 | tr -s ' \n' ' ')"
srun_plugin=""
for plugin in $plugins; do
  # pitrain-srun.sbatch takes --mpi=pmix unless PITRAIN_MPI names another.
  id=$(submit pitrain-srun.sbatch --export="ALL,PITRAIN_MPI=$plugin,$run_args") || continue
  if [ "$(state "$id")" = COMPLETED ]; then
    srun_plugin=$plugin
    check_trained "$id" "srun --mpi=$plugin"
    break
  fi
  echo "srun --mpi=$plugin: job $id ended $(state "$id"): $(grep -m1 -i 'error' "$work/run/slurm-$id.out")"
done
[ -n "$srun_plugin" ] || fail "srun: no MPI plugin of this Slurm ($plugins) connected the ranks"

# A rank that fails: a dataset that does not exist on the second rank's copy... here, one file for
# both, so a --data that is missing: every rank fails with the message, the job FAILED.
id=$(submit pitrain-mpirun.sbatch --export="ALL,PITRAIN_DATA=missing.h5,PITRAIN_EPOCHS=1") || fail "sbatch of the failing job"
if [ -n "${id:-}" ] && [ "$(state "$id")" = FAILED ] && grep -q "missing.h5: no such file" "$work/run/slurm-$id.out"; then
  ok "a failing job: $id FAILED, $(grep -m1 -o 'pitrain: error.*' "$work/run/slurm-$id.out")"
else
  fail "a failing job: $id ended $(state "$id")"
  cat "$work/run/slurm-$id.out"
fi

# A launcher that does not connect the ranks (srun --mpi=none) must not give two separate
# trainings: Debian's Open MPI refuses a direct launch without PMI in MPI_Init, and where an MPI
# starts them as lone ranks, --expect-ranks does.
id=$(submit pitrain-srun.sbatch --export="ALL,PITRAIN_MPI=none,$run_args") || fail "sbatch with --mpi=none"
if [ -n "${id:-}" ] && [ "$(state "$id")" = FAILED ] && ! grep -q "^Epoch" "$work/run/slurm-$id.out" &&
  grep -q "started as 1 rank(s), but --expect-ranks 2\|direct launched using \"srun\"" "$work/run/slurm-$id.out"; then
  ok "srun --mpi=none: job $id FAILED before training: $(grep -m1 -o "started as 1 rank.*\|direct launched using \"srun\"" "$work/run/slurm-$id.out")"
else
  fail "srun --mpi=none: job $id ended $(state "$id")"
  cat "$work/run/slurm-$id.out"
fi

echo "slurm tests: $failures failure(s)"
[ $failures -eq 0 ]
