#!/usr/bin/env bash
# Downloads Google's Quick, Draw! numpy_bitmap files (CC BY 4.0) for a class list into
# datasets/quickdraw/, then prepares datasets/quickdraw.h5 with the magazine's recipe: the first
# 4000 drawings of each class, shuffled, 10 % held out for validation.
# usage: datasets/download_quickdraw.sh [CLASS_LIST] [MAX_PER_CLASS]
#   default: datasets/magazine13.txt 4000
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list=${1:-$here/magazine13.txt}
max=${2:-4000}
bucket=https://storage.googleapis.com/quickdraw_dataset/full/numpy_bitmap
pitrain=${PITRAIN:-$here/../build/pitrain}
mkdir -p "$here/quickdraw"
grep -v '^#' "$list" | sed 's/#.*//; s/^ *//; s/ *$//' | grep -v '^$' | while read -r class; do
  out="$here/quickdraw/$class.npy"
  if [ -s "$out" ]; then echo "have $out"; continue; fi
  echo "fetching $class (about 100-200 MB per class: each file holds every drawing of its class)"
  curl -fL --retry 3 -o "$out.part" "$bucket/$(printf %s "$class" | sed 's/ /%20/g').npy"
  mv "$out.part" "$out"
done
"$pitrain" prepare --npy "$here/quickdraw" --classes "$list" --max-per-class "$max" --out "$here/quickdraw.h5"
