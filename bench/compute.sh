#!/usr/bin/env bash
# Compute benchmark, one process: images/s of real training steps (forward, backward, update,
# batching) of `pitrain train` against the PyTorch peer (../shared/peers/torch_ddp.py) on the
# same data, model, batch and threads, in the same run, alternating; medians of REPEATS runs
# each. Thread scaling: 1, 2 and, on machines that have them, 4 threads, each against our own
# 1 thread and the peer at the same count; then, for cnn at batch 32, 1 and 2 threads alternating
# with two 1-thread processes at once (the most 2 threads could reach on this machine), two
# 1-thread ranks that split each batch as 2 threads do, and 1 thread held on each CPU in turn
# (a VM's vCPUs need not run at one speed; one run a CPU a repeat); and 1 and 2 threads with a busy
# neighbour (one process spinning on a core). Also our GFLOP/s (forward x 3, counted as a
# direct convolution) next to one plain SGEMM on conv2's im2col shape (3872x288x64) by each GEMM
# the build has for this CPU.
# usage: bench/compute.sh [REPEATS]   (default 5; needs python3-torch python3-h5py for the peer)
set -euo pipefail
repeats=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
peer=${PEER:-$root/../shared/peers/torch_ddp.py}
work=$(mktemp -d /tmp/pitrain-bench-XXXXXX)
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
burner=""
trap '[ -n "$burner" ] && kill $burner 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
require_peer "$peer"
prepare_bench_data "$build" "$root" "$work/d.h5"
data=$bench_data
thread_counts="1 2"
[ "$(nproc)" -ge 4 ] && thread_counts="1 2 4"

# run TAG MODEL BATCH THREADS: one run of each trainer, appended to ours-TAG and peer-TAG.
run() {
  local tag=$1 model=$2 batch=$3 threads=$4 seed=$5 steps=$((24000 / $3))  # about 24k images a run
  "$build/pitrain" train --data "$work/d.h5" --model "$model" --batch-size "$batch" --threads "$threads" \
    --epochs 1 --steps-per-epoch $steps --seed "$seed" --json | tail -n 1 >>"$work/ours-$tag"
  /usr/bin/python3 "$peer" --data "$work/d.h5" --model "$model" --batch-size "$batch" --threads "$threads" \
    --epochs 1 --steps-per-epoch $steps --seed "$seed" 2>/dev/null | tail -n 1 >>"$work/peer-$tag"
}

for model in cnn mlp; do
  for batch in 8 32 128; do
    for r in $(seq "$repeats"); do
      for threads in $thread_counts; do run "$model-$batch-$threads" $model $batch $threads "$r"; done
    done
    for threads in $thread_counts; do
      "$build/bench/compute_bench" --model $model --batch $batch --threads $threads --steps $((24000 / batch)) \
        >"$work/flops-$model-$batch-$threads"
    done
  done
done
sgemm=$("$build/bench/compute_bench" --sgemm 3872,288,64)

# Two threads against what processes reach in the same minutes (cnn, batch 32, alternating): two
# 1-thread processes at once, their images/s added, the most 2 threads could reach here (two
# vCPUs need not be two whole cores, and they share caches); and two 1-thread ranks that split
# each batch as the threads do, summing their gradients every step.
# cnn32 [LAUNCHER...] -- ARGS: one cnn run of 750 steps (by LAUNCHER, e.g. mpirun), its JSON line.
cnn32() {
  local launcher=()
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  "${launcher[@]}" "$build/pitrain" train --data "$work/d.h5" --model cnn --epochs 1 --steps-per-epoch 750 --json "$@" \
    </dev/null | tail -n 1
}
cpus=$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')  # the CPUs this script may run on
for r in $(seq "$repeats"); do
  for threads in 1 2; do cnn32 -- --batch-size 32 --threads $threads --seed "$r" >>"$work/alt-$threads"; done
  pids=()
  for i in 1 2; do
    cnn32 -- --batch-size 32 --threads 1 --seed "$r" >"$work/pair-$i" &
    pids+=($!)
  done
  # Each process on its own: a bare `wait` returns 0 whatever they did.
  for i in 1 2; do
    if ! wait "${pids[i - 1]}" || ! grep -q images_per_second "$work/pair-$i"; then
      echo "bench/compute.sh: process $i of the pair (seed $r) failed or printed no JSON line; its errors are above" >&2
      exit 1
    fi
  done
  cat "$work/pair-1" "$work/pair-2" | python3 -c 'import json, sys; print(json.dumps({"images_per_second": sum(json.loads(l)["images_per_second"] for l in sys.stdin)}))' >>"$work/pair-sum"
  cnn32 mpirun -q --bind-to none -np 2 -- --batch-size 16 --threads 1 --seed "$r" >>"$work/split"
  for cpu in $cpus; do cnn32 taskset -c "$cpu" -- --batch-size 32 --threads 1 --seed "$r" >>"$work/cpu-$cpu"; done
done

python3 -c 'while True: pass' &  # the busy neighbour: one core taken
burner=$!
for r in $(seq "$repeats"); do
  for threads in 1 2; do run "busy-cnn-32-$threads" cnn 32 $threads "$r"; done
done
kill $burner
burner=""

python3 - "$work" "$repeats" "$data" "$sgemm" "$thread_counts" "$cpus" <<'PY'
import json, os, statistics, sys
work, repeats, data, sgemm, counts = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5].split()
cpus = sys.argv[6].split()
def med(name, key):
    return statistics.median(json.loads(l)[key] for l in open(os.path.join(work, name)) if l.strip())
peer_blas = json.loads(open(os.path.join(work, "peer-cnn-32-1")).readline())["blas"]
print(f"data: {data}; medians of {repeats} runs; images/s of training steps (validation excluded)")
print(f"peer BLAS: {peer_blas}")
print()
print("| model | batch | threads | pitrain img/s | vs own 1 thread | peer img/s | vs peer | pitrain GFLOP/s |")
print("|---|---|---|---|---|---|---|---|")
for model in ("cnn", "mlp"):
    for batch in (8, 32, 128):
        one = med(f"ours-{model}-{batch}-1", "images_per_second")
        for threads in counts:
            tag = f"{model}-{batch}-{threads}"
            ours, peer = med("ours-" + tag, "images_per_second"), med("peer-" + tag, "images_per_second")
            flops = json.loads(open(os.path.join(work, "flops-" + tag)).read())["gflops"]
            print(f"| {model} | {batch} | {threads} | {ours:.0f} | {ours / one:.2f}x | {peer:.0f} | {ours / peer:.2f}x | {flops:.1f} |")
print()
print("Two threads against processes in the same minutes (cnn, batch 32, alternating):")
print()
print("| run | images/s | vs 1 thread |")
print("|---|---|---|")
one = med("alt-1", "images_per_second")
for name, label in [("alt-1", "1 thread"), ("alt-2", "2 threads"),
                    ("pair-sum", "two 1-thread processes at once, added: what 2 threads could reach here"),
                    ("split", "two 1-thread ranks splitting each batch (16 rows each, gradients summed every step)")] + [
                    (f"cpu-{cpu}", f"1 thread held on CPU {cpu} (taskset): that core's own speed in these minutes") for cpu in cpus]:
    ips = med(name, "images_per_second")
    print(f"| {label} | {ips:.0f} | {ips / one:.2f}x |")
print()
print("With a busy neighbour (one process spinning on a core), cnn, batch 32:")
print()
print("| threads | pitrain img/s | vs own 1 thread | peer img/s | vs peer |")
print("|---|---|---|---|---|")
one = med("ours-busy-cnn-32-1", "images_per_second")
for threads in ("1", "2"):
    ours, peer = med(f"ours-busy-cnn-32-{threads}", "images_per_second"), med(f"peer-busy-cnn-32-{threads}", "images_per_second")
    print(f"| {threads} | {ours:.0f} | {ours / one:.2f}x | {peer:.0f} | {ours / peer:.2f}x |")
print()
rates = ", ".join(f"{name} {gflops:.1f}" for name, gflops in sgemm["sgemm_gflops"].items())
print(f"one SGEMM 3872x288x64 through gemm(), 1 thread, GFLOP/s: {rates} (the first is the one pitrain uses)")
PY
