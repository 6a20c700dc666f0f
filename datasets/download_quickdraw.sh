#!/usr/bin/env bash
# Downloads the first MAX_PER_CLASS drawings of Google's Quick, Draw! numpy_bitmap files
# (CC BY 4.0) for a class list into datasets/quickdraw/, then prepares datasets/quickdraw.h5 with
# the magazine's recipe: the first 4000 drawings of each class, shuffled, 10 % held out.
# A numpy_bitmap file is a .npy header and then 784 bytes a drawing, so the first rows are two
# HTTP range requests (the header, then the rows), not the whole file (100-200 MB a class).
# usage: datasets/download_quickdraw.sh [CLASS_LIST] [MAX_PER_CLASS]
#   default: datasets/magazine13.txt 4000
#   QUICKDRAW_URL: where the <class>.npy files are (default: Google's bucket; a file:// URL works)
#   QUICKDRAW_DIR: where the .npy files and quickdraw.h5 go (default: datasets/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list=${1:-$here/magazine13.txt}
max=${2:-4000}
url=${QUICKDRAW_URL:-https://storage.googleapis.com/quickdraw_dataset/full/numpy_bitmap}
dir=${QUICKDRAW_DIR:-$here}
pitrain=${PITRAIN:-$here/../build/pitrain}
fail() { echo "download_quickdraw.sh: $*" >&2; exit 1; }
[ -f "$list" ] || fail "$list: no such class list"
[[ $max =~ ^[1-9][0-9]*$ ]] || fail "MAX_PER_CLASS must be a positive number of drawings, not '$max'"
mapfile -t classes < <(sed 's/\r$//; s/#.*//; s/^ *//; s/ *$//' "$list" | grep -v '^$')
[ "${#classes[@]}" -gt 0 ] || fail "$list names no class"
# A class name becomes a file name and part of a URL: only what Quick Draw's names are made of
# (then a space is the one character to encode).
for class in "${classes[@]}"; do
  [[ $class =~ ^[A-Za-z0-9\ _-]+$ ]] ||
    fail "$list: class name '$(printf %q "$class")' has a character outside letters, digits, space, _ and -"
done

# npy_rows FILE: checks a .npy header (uint8, C order, (N, 784)) and prints "N HEADER_BYTES".
npy_rows() {
  local file=$1 major len start header rows
  [ "$(head -c 6 "$file" | tail -c 5)" = NUMPY ] || { echo "$file: not a .npy file" >&2; return 1; }
  major=$(od -An -tu1 -j6 -N1 "$file" | tr -d ' ')
  if [ "$major" = 1 ]; then
    start=10 len=$(od -An -tu2 -j8 -N2 --endian=little "$file" | tr -d ' ')
  else
    start=12 len=$(od -An -tu4 -j8 -N4 --endian=little "$file" | tr -d ' ')
  fi
  header=$(tail -c +$((start + 1)) "$file" | head -c "$len")
  rows=$(sed -n "s/.*'shape': *(\([0-9]*\), *784).*/\1/p" <<<"$header")
  if [[ $header != *"'descr': '|u1'"* || $header != *"'fortran_order': False"* || -z $rows ]]; then
    echo "$file: header $(sed 's/ *$//' <<<"$header") is not a uint8 C-order array of shape (N, 784)" >&2
    return 1
  fi
  echo "$rows $((start + len))"
}

# npy_header ROWS: a version 1 header for (ROWS, 784) uint8, padded to a multiple of 64 bytes.
npy_header() {
  local dict="{'descr': '|u1', 'fortran_order': False, 'shape': ($1, 784), }"
  local len=$(((10 + ${#dict} + 1 + 63) / 64 * 64 - 10))
  printf '\x93NUMPY\x01\x00'
  printf "\\x$(printf %02x $((len % 256)))\\x$(printf %02x $((len / 256)))"
  printf '%-*s\n' $((len - 1)) "$dict"
}

mkdir -p "$dir/quickdraw"
trap 'rm -f "$dir"/quickdraw/*.npy.part "$dir"/quickdraw/*.npy.rows' EXIT
echo "downloading the first $max drawings of ${#classes[@]} classes: at most" \
  "$(awk -v b=$((max * 784 * ${#classes[@]})) 'BEGIN { printf "%.1f MB", b / 1e6 }') into $dir/quickdraw"
total=0
for class in "${classes[@]}"; do
  out=$dir/quickdraw/$class.npy
  if [ -s "$out" ] && have=$(npy_rows "$out" 2>/dev/null) && [ "${have%% *}" -ge "$max" ]; then
    echo "have $out (${have%% *} drawings)"
    continue
  fi
  source_url="$url/$(sed 's/ /%20/g' <<<"$class").npy"
  # --max-filesize: a server that ignores the range would send the whole file instead.
  curl -fsS --retry 3 -r 0-4095 --max-filesize 4096 -o "$out.part" "$source_url" ||
    fail "$class: cannot fetch the first 4096 bytes of $source_url (a server without range requests?)"
  head_bytes=$(stat -c %s "$out.part")
  read -r rows offset < <(npy_rows "$out.part") || fail "$class: $source_url is not a numpy_bitmap file"
  keep=$((rows < max ? rows : max))
  bytes=$((keep * 784))
  curl -fsS --retry 3 -r "$offset-$((offset + bytes - 1))" --max-filesize "$bytes" -o "$out.rows" "$source_url" ||
    fail "$class: cannot fetch the first $keep drawings of $source_url"
  [ "$(stat -c %s "$out.rows")" -eq "$bytes" ] ||
    fail "$class: $source_url sent $(stat -c %s "$out.rows") bytes for $keep drawings, not $bytes (range requests refused?)"
  { npy_header "$keep"; cat "$out.rows"; } >"$out.part"
  rm "$out.rows"
  mv "$out.part" "$out"
  total=$((total + head_bytes + bytes))
  echo "fetched $class: $keep of its $rows drawings, $(awk -v b=$((head_bytes + bytes)) 'BEGIN { printf "%.1f MB", b / 1e6 }')"
done
echo "downloaded $(awk -v b=$total 'BEGIN { printf "%.1f MB", b / 1e6 }') in all"
"$pitrain" prepare --npy "$dir/quickdraw" --classes "$list" --max-per-class "$max" --out "$dir/quickdraw.h5"
