#!/usr/bin/env bash
# Final validation accuracy of each way of synchronising in a list of bench/sync_variants/
# (default.txt unless --variants) against one host, at the cluster benchmark's budget: cnn at
# batch 32 a rank (or the magazine's mlp at 8), 4 ranks, 10 x 9,600 images (--images: another
# budget), for several seeds. Training is deterministic for a seed whatever the links, so this
# runs on one machine (mpirun --oversubscribe); bench/sync_variants.sh measures the times. With
# --target, each cell also gives the validation that first reached the target ("-": none),
# counting validations every --eval-images images (default 9,600; 3,200 is bench/cluster.sh's
# mlp runs, 30 validations).
# usage: bench/sync_accuracy.sh [--model cnn|mlp] [--variants FILE] [--eval-images N] [--images N] [--target A] [SEED...]
#        (the magazine's budget, mlp: --eval-images 8192 --images 262144, 32 epochs of 256 steps on 4 ranks)
#        (default cnn, bench/sync_variants/default.txt, seeds 0 1 2; about 10 minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
model=cnn variants=$root/bench/sync_variants/default.txt eval_images=9600 images=96000 target=
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --eval-images) eval_images=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
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
# final NP ARGS...: for each seed, the last validation accuracy of an $images-image run (and with
# --target the validation that first reached it); then the medians. A run that fails or stops
# short is "nan -" in its seed's cell (a warning on stderr) and out of the medians.
final() {
  local np=$1 steps=$((eval_images / (batch * $1))) epochs=$((images / eval_images)) rc
  shift
  for seed in "${seeds[@]}"; do
    rm -f "$work/log.csv"
    rc=0
    # shellcheck disable=SC2068
    mpirun -np "$np" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$build/pitrain" train \
      --data "$work/d.h5" --model "$model" --batch-size "$batch" --threads 1 --epochs "$epochs" \
      --steps-per-epoch "$steps" --seed "$seed" --log "$work/log.csv" --json $@ </dev/null >/dev/null || rc=$?
    python3 - "$work/log.csv" "$target" "$rc" "$epochs" "seed $seed, $np ranks, $*" <<'PY'
import csv, os, sys
log, target, rc, epochs, run = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = list(csv.DictReader(open(log))) if os.path.exists(log) else []
if rc != 0 or len(rows) < epochs:
    print(f"bench/sync_accuracy.sh: {run}: exit {rc}, {len(rows)} of {epochs} epochs logged; "
          "left out of the medians (its errors are above)", file=sys.stderr)
    print("nan -")
    sys.exit()
hit = next((r["epoch"] for r in rows if target and float(r["val_accuracy"]) >= float(target)), "-")
print(rows[-1]["val_accuracy"], hit)
PY
  done | python3 -c '
import math, sys, statistics as s
runs = [l.split() for l in sys.stdin]
cells = [f"{float(a):.4f}" + (f" ({e})" if sys.argv[1] else "") for a, e in runs]
ok = [(float(a), e) for a, e in runs if not math.isnan(float(a))]
median = f"{s.median(a for a, _ in ok):.4f}" if ok else "nan"
hits = [int(e) for _, e in ok if e != "-"]
median_hit = (f" ({s.median(hits):g})" if ok and len(hits) == len(ok) else " (-)") if sys.argv[1] else ""
print(" | ".join(cells) + f" | {median}" + median_hit)' "$target"
}
echo "data: $bench_data"
echo
echo "| variant | hosts | $(printf 'seed %s | ' "${seeds[@]}")median |"
echo "|---|---|$(printf -- '---|%.0s' "${seeds[@]}")---|"
echo "| one host | 1 | $(final 1) |"
grep -v '^#' "$variants" | while IFS='|' read -r name args; do
  # shellcheck disable=SC2086
  echo "| $name | 4 | $(final 4 $args) |"
done
