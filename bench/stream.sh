#!/usr/bin/env bash
# Streamed rank slices (docs/data.md, "Data larger than a rank's memory"):
#   memory    peak RSS of each of 2 ranks training `cnn` (default --data-memory) on a generated
#             set of ROWS 28x28 images (default 4,000,000, 3.1 GB), Quick Draw's drawings tiled
#   speed     images/s of `cnn` on 1 thread, streamed (--data-memory 8: windows of about 2,600
#             rows) against in memory, on the 15-class set, alternating, medians of REPEATS
#   accuracy  final validation accuracy after 5 epochs, streamed against in memory, seeds 1-3
#             (SEEDS="4 5 6": others)
#   prepare   peak RSS of `pitrain prepare --npy` (default --memory) making the large set from 15
#             .npy class files of ROWS/15 drawings each
# usage: bench/stream.sh [ROWS] [REPEATS]   (default 4000000 5; needs python3-h5py)
set -euo pipefail
rows=${1:-4000000} repeats=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
work=$(mktemp -d /tmp/pitrain-stream-XXXXXX)
trap 'rm -rf "$work"' EXIT
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
prepare_bench_data "$build" "$root" "$work/d.h5"

# The large set: the small one's rows tiled, in chunks of 4096 rows, as `prepare` writes them.
/usr/bin/python3 - "$work/d.h5" "$work/big.h5" "$rows" <<'PY'
import sys, h5py, numpy as np
src, out, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(src, "r") as f, h5py.File(out, "w") as g:
    for split, n in (("train", rows), ("val", rows // 10)):
        images, labels = f["train/images"][:], f["train/labels"][:]
        di = g.create_dataset(split + "/images", (n, 28, 28), np.uint8, chunks=(4096, 28, 28))
        dl = g.create_dataset(split + "/labels", (n,), np.int32, chunks=(65536,))
        for at in range(0, n, len(labels)):
            k = min(len(labels), n - at)
            di[at:at + k], dl[at:at + k] = images[:k], labels[:k]
    g.attrs["class_names"] = f.attrs["class_names"]
PY
big_mb=$(du -m "$work/big.h5" | cut -f1)

# The large set from .npy files, as from a folder of Quick Draw classes; then they are removed.
mkdir "$work/npy"
/usr/bin/python3 - "$work/d.h5" "$work/npy" "$rows" <<'PY'
import sys, h5py, numpy as np
src, out, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
images = h5py.File(src, "r")["train/images"][:].reshape(-1, 784)
for c in range(15):
    n = rows // 15
    a = np.lib.format.open_memmap(f"{out}/class{c:02d}.npy", mode="w+", dtype=np.uint8, shape=(n, 784))
    for at in range(0, n, len(images)):
        k = min(len(images), n - at)
        a[at:at + k] = images[:k]
    a.flush()
PY
prepare_rss=$( { /usr/bin/time -f "%M" "$build/pitrain" prepare --npy "$work/npy" --out "$work/big2.h5" >/dev/null; } 2>&1 | tail -n 1)
rm -rf "$work/npy" "$work/big2.h5"

# Peak RSS of each rank (VmHWM), polled until the job ends.
peak_rss() {
  "$@" >"$work/job.out" 2>&1 &
  local job=$! pid
  declare -A peak
  while kill -0 $job 2>/dev/null; do
    for pid in $(pgrep -f "^$build/pitrain train" || true); do  # the ranks, not mpirun
      kb=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$kb" ] && [ "$kb" -gt "${peak[$pid]:-0}" ] && peak[$pid]=$kb
    done
    sleep 0.1
  done
  wait $job || { cat "$work/job.out"; exit 1; }
  for pid in "${!peak[@]}"; do echo $((peak[$pid] / 1024)); done | sort -n | tr '\n' ' '
}
rss=$(peak_rss mpirun -np 2 --oversubscribe --bind-to none "$build/pitrain" train --data "$work/big.h5" \
  --model cnn --threads 1 --epochs 1 --steps-per-epoch 4000 --json)
grep '^{' "$work/job.out" | tail -n 1 >"$work/big.json"

run() {  # run TAG ARGS...: one JSON line appended to TAG
  local tag=$1
  shift
  "$build/pitrain" train --data "$work/d.h5" --model cnn --threads 1 --json "$@" | tail -n 1 >>"$work/$tag"
}
for r in $(seq "$repeats"); do
  run speed-memory --epochs 1 --steps-per-epoch 1500 --seed "$r"
  run speed-stream --epochs 1 --steps-per-epoch 1500 --seed "$r" --data-memory 8
done
for seed in ${SEEDS:-1 2 3}; do
  run acc-memory --epochs 5 --seed "$seed"
  run acc-stream --epochs 5 --seed "$seed" --data-memory 8
done

python3 - "$work" "$repeats" "$bench_data" "$rows" "$big_mb" "$rss" "$prepare_rss" <<'PY'
import json, os, statistics, sys
work, repeats, data, rows, big_mb, rss, prepare_kb = sys.argv[1:8]
mode = json.load(open(os.path.join(work, "big.json")))["data"]
def vals(tag, key):
    return [json.loads(l)[key] for l in open(os.path.join(work, tag)) if l.strip()]
print(f"memory: {int(rows):,} images ({big_mb} MB file), cnn, 2 ranks, default --data-memory: "
      f"peak RSS a rank {rss.strip().replace(' ', ' MB, ')} MB; data {mode}")
mem, stream = statistics.median(vals("speed-memory", "images_per_second")), statistics.median(vals("speed-stream", "images_per_second"))
print(f"speed ({data}; cnn, 1 thread, medians of {repeats}): in memory {mem:.0f} img/s, "
      f"streamed {stream:.0f} img/s: {stream / mem:.3f}x")
am, ast = vals("acc-memory", "val_accuracy"), vals("acc-stream", "val_accuracy")
print(f"accuracy after 5 epochs, seeds {os.environ.get('SEEDS', '1 2 3')}: in memory " + ", ".join(f"{a:.4f}" for a in am) +
      f" (mean {statistics.mean(am):.4f}); streamed " + ", ".join(f"{a:.4f}" for a in ast) +
      f" (mean {statistics.mean(ast):.4f}): {100 * (statistics.mean(ast) - statistics.mean(am)):+.2f} points")
print(f"prepare --npy of {int(rows) // 15 * 15:,} drawings in 15 class files: peak RSS {int(prepare_kb) // 1024} MB")
PY
