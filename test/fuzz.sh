#!/usr/bin/env bash
# Fuzzes the .npy/IDX readers and the checkpoint loader with libFuzzer and AddressSanitizer for a
# bounded time, then copies any crashing input into test/fuzz/regressions/ (replayed by the unit
# tests once fixed). Needs clang, libfuzzer-14-dev and libclang-rt-14-dev. malloc may return NULL, as it
# does without ASan: libhdf5 asks for absurd sizes on corrupt files and handles the failure.
# usage: test/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
[ -f "$build/build.ninja" ] || CC=clang CXX=clang++ meson setup "$build" "$root" -Dfuzz=true -Db_sanitize=address \
  -Dbuildtype=debugoptimized -Db_lundef=false >/dev/null
ninja -C "$build" fuzz_readers fuzz_checkpoint pitrain >/dev/null
work=$(mktemp -d /tmp/pitrain-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/readers" "$work/checkpoint" "$root/test/fuzz/regressions"
# Seeds: a valid .npy and IDX file, and a real checkpoint.
python3 - "$work/readers" <<'PY'
import os, struct, sys
d = sys.argv[1]
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 784), }"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
open(os.path.join(d, "seed.npy"), "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(range(256)) * 6 + bytes(32))
open(os.path.join(d, "seed.idx"), "wb").write(struct.pack(">BBBBIII", 0, 0, 8, 3, 2, 28, 28) + bytes(1568))
open(os.path.join(d, "labels.idx"), "wb").write(struct.pack(">BBBBI", 0, 0, 8, 1, 3) + bytes([0, 1, 2]))
PY
cp "$work/readers/seed.idx" "$work/t10k-images-idx3-ubyte"
cp "$work/readers/seed.idx" "$work/train-images-idx3-ubyte"
printf '\0\0\10\1\0\0\0\2\0\1' >"$work/train-labels-idx1-ubyte"
cp "$work/train-labels-idx1-ubyte" "$work/t10k-labels-idx1-ubyte"
ASAN_OPTIONS=detect_leaks=0 "$build/pitrain" prepare --idx "$work" --classes a,b --out "$work/d.h5" >/dev/null
ASAN_OPTIONS=detect_leaks=0 "$build/pitrain" train --data "$work/d.h5" --model "flatten dense(classes)" --epochs 1 \
  --checkpoint "$work/checkpoint/seed.h5" >/dev/null
status=0
for target in readers checkpoint; do
  echo "fuzzing $target for ${seconds}s"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "$build/fuzz_$target" -max_total_time="$seconds" -max_len=65536 \
    -print_final_stats=1 "$work/$target" "$root/test/fuzz/regressions" 2>&1 | grep -E "^(stat::number_of_executed_units|SUMMARY|==[0-9]+== ?ERROR)" || true)
  for crash in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$crash" ] || continue
    cp "$crash" "$root/test/fuzz/regressions/$target-$(basename "$crash")"
    echo "found: test/fuzz/regressions/$target-$(basename "$crash")"
    rm -f "$crash"
    status=1
  done
done
exit $status
