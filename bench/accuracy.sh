#!/usr/bin/env bash
# Accuracy runs on the real Quick Draw data (../shared/quickdraw, 15 classes, 10 % validation),
# pitrain and the PyTorch peer side by side with the same model, batch, budget and seed:
#   the magazine's budget (32 epochs x 256 steps) at batch 16, cnn and mlp, one process;
#   8 epochs of cnn at batch 32, one process and 4 ranks (mpirun -np 4 --oversubscribe);
#   the magazine run (mlp, batch 8 a rank, 32 x 256 steps) on 2 and 4 ranks.
# usage: bench/accuracy.sh   (prints a Markdown table; about 20 minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
peer=${PEER:-$root/../shared/peers/torch_ddp.py}
src=$root/../shared/quickdraw
[ -f "$src/apple.npy" ] || { echo "SKIP: no Quick Draw files in $src"; exit 0; }
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
require_peer "$peer"
work=$(mktemp -d /tmp/pitrain-acc-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$build/pitrain" prepare --npy "$src" --classes "$root/datasets/quickdraw15.txt" --out "$work/qd.h5" >/dev/null
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { mpirun -q --oversubscribe --bind-to none -np "$@" </dev/null; }

echo "| run | ranks | pitrain val_accuracy | pitrain train s | peer val_accuracy | peer train s |"
echo "|---|---|---|---|---|---|"
run() {  # run LABEL RANKS ARGS...: both trainers, one row
  local label=$1 ranks=$2; shift 2
  local ours peer_out
  ours=$(mpi "$ranks" "$build/pitrain" train --data "$work/qd.h5" --threads 1 --json "$@" | tail -n 1)
  peer_out=$(mpi "$ranks" /usr/bin/python3 "$peer" --data "$work/qd.h5" --threads 1 "$@" 2>/dev/null | tail -n 1)
  python3 -c '
import json, sys
o, p = json.loads(sys.argv[3]), json.loads(sys.argv[4])
a, b, c, d = o["val_accuracy"], o["train_seconds"], p["val_accuracy"], p["train_seconds"]
print(f"| {sys.argv[1]} | {sys.argv[2]} | {a:.4f} | {b:.0f} | {c:.4f} | {d:.0f} |")
' "$label" "$ranks" "$ours" "$peer_out"
}
run "cnn, batch 16, 32 x 256 steps" 1 --model cnn --batch-size 16 --epochs 32 --steps-per-epoch 256
run "mlp, batch 16, 32 x 256 steps" 1 --model mlp --batch-size 16 --epochs 32 --steps-per-epoch 256
run "cnn, batch 32, 8 epochs" 1 --model cnn --batch-size 32 --epochs 8
run "cnn, batch 32 a rank, 8 epochs" 4 --model cnn --batch-size 32 --epochs 8
run "mlp, batch 8 a rank, 32 x 256 steps (magazine)" 2 --model mlp --batch-size 8 --epochs 32 --steps-per-epoch 256
run "mlp, batch 8 a rank, 32 x 256 steps (magazine)" 4 --model mlp --batch-size 8 --epochs 32 --steps-per-epoch 256
