#!/usr/bin/env bash
# Compute benchmark, one process: images/s of real training steps (forward, backward, update,
# batching) of `pitrain train` against the PyTorch peer (../shared/peers/torch_ddp.py) on the
# same data, model, batch and threads, in the same run; medians of REPEATS runs each. Also our
# GFLOP/s (forward x 3) next to one plain SGEMM's on conv2's im2col shape (3872x288x64).
# usage: bench/compute.sh [REPEATS]   (default 5; needs python3-torch python3-h5py for the peer)
set -euo pipefail
repeats=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
peer=${PEER:-$root/../shared/peers/torch_ddp.py}
work=$(mktemp -d /tmp/pitrain-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
prepare_bench_data "$build" "$root" "$work/d.h5"
data=$bench_data
[ -f "$peer" ] || { echo "no peer at $peer (set PEER=...)" >&2; exit 1; }

for model in cnn mlp; do
  for batch in 8 32 128; do
    for threads in 1 2; do
      steps=$((24000 / batch))  # about 24k images a run
      for r in $(seq "$repeats"); do
        "$build/pitrain" train --data "$work/d.h5" --model $model --batch-size $batch --threads $threads \
          --epochs 1 --steps-per-epoch $steps --seed $r --json | tail -n 1 >>"$work/ours-$model-$batch-$threads"
        /usr/bin/python3 "$peer" --data "$work/d.h5" --model $model --batch-size $batch --threads $threads \
          --epochs 1 --steps-per-epoch $steps --seed $r 2>/dev/null | tail -n 1 >>"$work/peer-$model-$batch-$threads"
      done
      "$build/bench/compute_bench" --model $model --batch $batch --threads $threads --steps $steps >"$work/flops-$model-$batch-$threads"
    done
  done
done
sgemm=$("$build/bench/compute_bench" --sgemm 3872,288,64)

python3 - "$work" "$repeats" "$data" "$sgemm" <<'PY'
import json, os, statistics, sys
work, repeats, data, sgemm = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
def med(name, key):
    return statistics.median(json.loads(l)[key] for l in open(os.path.join(work, name)) if l.strip())
peer_blas = json.loads(open(os.path.join(work, "peer-cnn-32-1")).readline())["blas"]
print(f"data: {data}; medians of {repeats} runs; images/s of training steps (validation excluded)")
print(f"peer BLAS: {peer_blas}")
print()
print("| model | batch | threads | pitrain img/s | peer img/s | ratio | pitrain GFLOP/s |")
print("|---|---|---|---|---|---|---|")
for model in ("cnn", "mlp"):
    for batch in (8, 32, 128):
        for threads in (1, 2):
            tag = f"{model}-{batch}-{threads}"
            ours, peer = med("ours-" + tag, "images_per_second"), med("peer-" + tag, "images_per_second")
            flops = json.loads(open(os.path.join(work, "flops-" + tag)).read())["gflops"]
            print(f"| {model} | {batch} | {threads} | {ours:.0f} | {peer:.0f} | {ours / peer:.2f}x | {flops:.1f} |")
print()
print(f"one SGEMM 3872x288x64 through the same gemm(), 1 thread: {sgemm['sgemm_gflops']:.1f} GFLOP/s")
PY
