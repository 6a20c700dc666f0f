#!/usr/bin/env bash
# The real Quick Draw files in ../shared/quickdraw (15 classes, 46,750 drawings): prepare writes
# all of them, and a short cnn run under mpirun -np 2 learns them. Skipped (exit 77) without them.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
src=${PITRAIN_SHARED:-$here/../shared}/quickdraw
if [ ! -f "$src/apple.npy" ]; then
  echo "SKIP: no Quick Draw files in $src (the real-data test needs ../shared/quickdraw)"
  exit 77
fi
PITRAIN=${PITRAIN:?set PITRAIN to the pitrain binary}
work=$(mktemp -d /tmp/pitrain-qd-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$PITRAIN" prepare --npy "$src" --classes "$here/datasets/quickdraw15.txt" --out "$work/qd.h5" | tee "$work/prep"
grep -q "wrote $work/qd.h5: 46750 images in 15 classes" "$work/prep"
grep -qE "^total +42075 +4675$" "$work/prep"
timeout 300 mpirun -q --oversubscribe --bind-to none -np 2 "$PITRAIN" train --data "$work/qd.h5" --epochs 1 \
  --threads 1 --json </dev/null | tail -n 1 | tee "$work/json"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["val_accuracy"] > 0.8, j' "$work/json"
echo "quickdraw: ok"
