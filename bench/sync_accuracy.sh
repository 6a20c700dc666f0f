#!/usr/bin/env bash
# Final validation accuracy of each way of synchronising (bench/sync_variants.txt) against one
# host, at the cluster benchmark's budget: cnn at batch 32 a rank (or the magazine's mlp at 8),
# 4 ranks, 10 x 9,600 images, for several seeds. Training is deterministic for a seed whatever
# the links, so this runs on one machine (mpirun --oversubscribe); bench/sync_variants.sh
# measures the times.
# usage: bench/sync_accuracy.sh [--model cnn|mlp] [--variants FILE] [SEED...]
#        (default cnn, bench/sync_variants.txt, seeds 0 1 2; about 10 minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
model=cnn variants=$root/bench/sync_variants.txt
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    *) break ;;
  esac
done
batch=32
[ "$model" = mlp ] && batch=8
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2)
work=$(mktemp -d /tmp/pitrain-syncacc-XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
prepare_bench_data "$build" "$root" "$work/d.h5"
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1
# final NP ARGS...: the last validation accuracy of a 96,000-image run, for each seed.
final() {
  local np=$1 steps=$((9600 / (batch * $1)))
  shift
  for seed in "${seeds[@]}"; do
    # shellcheck disable=SC2068
    mpirun -np "$np" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$build/pitrain" train \
      --data "$work/d.h5" --model "$model" --batch-size "$batch" --threads 1 --epochs 10 --steps-per-epoch "$steps" \
      --seed "$seed" --json $@ </dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["val_accuracy"])'
  done | python3 -c 'import sys, statistics as s; v=[float(l) for l in sys.stdin]; print(" | ".join(f"{x:.4f}" for x in v) + f" | {s.median(v):.4f}")'
}
echo "| variant | hosts | $(printf 'seed %s | ' "${seeds[@]}")median |"
echo "|---|---|$(printf -- '---|%.0s' "${seeds[@]}")---|"
echo "| one host | 1 | $(final 1) |"
grep -v '^#' "$variants" | while IFS='|' read -r name args; do
  # shellcheck disable=SC2086
  echo "| $name | 4 | $(final 4 $args) |"
done
