#!/usr/bin/env bash
# datasets/download_quickdraw.sh against generated numpy_bitmap files behind a file:// URL (curl
# takes byte ranges there as from a web server): it keeps the first MAX rows bit for bit, fetches
# only the header and those rows, keeps every row of a shorter file, refuses a file that is not
# (N, 784) uint8 with its name, and prepares the .h5.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
export PITRAIN=${PITRAIN:?set PITRAIN to the pitrain binary}
work=$(mktemp -d /tmp/pitrain-download-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bucket" "$work/out"
/usr/bin/python3 - "$work/bucket" <<'PY'
import numpy as np, sys
rng = np.random.default_rng(1)
np.save(f"{sys.argv[1]}/apple.npy", rng.integers(0, 256, (3000, 784), dtype=np.uint8))
np.save(f"{sys.argv[1]}/hot dog.npy", rng.integers(0, 256, (700, 784), dtype=np.uint8))  # fewer than MAX
np.save(f"{sys.argv[1]}/float.npy", np.zeros((10, 784), dtype=np.float32))
PY
printf 'apple\nhot dog\n' >"$work/list.txt"
QUICKDRAW_URL=file://$work/bucket QUICKDRAW_DIR=$work/out bash "$here/datasets/download_quickdraw.sh" \
  "$work/list.txt" 1000 | tee "$work/log"
# The first 4096 bytes of each file (its header) + 1000 + 700 rows of 784 bytes.
grep -qx "downloaded $(awk 'BEGIN { printf "%.1f", (2 * 4096 + 1700 * 784) / 1e6 }') MB in all" "$work/log"
grep -q "fetched hot dog: 700 of its 700 drawings" "$work/log"
/usr/bin/python3 - "$work" <<'PY'
import numpy as np, sys
w = sys.argv[1]
for name, rows in [("apple", 1000), ("hot dog", 700)]:
    got, full = np.load(f"{w}/out/quickdraw/{name}.npy"), np.load(f"{w}/bucket/{name}.npy")
    assert got.shape == (rows, 784) and (got == full[:rows]).all(), (name, got.shape)
PY
grep -q "wrote $work/out/quickdraw.h5: 1700 images in 2 classes" "$work/log"

printf 'float\n' >"$work/float.txt"
if QUICKDRAW_URL=file://$work/bucket QUICKDRAW_DIR=$work/out bash "$here/datasets/download_quickdraw.sh" \
  "$work/float.txt" 5 2>"$work/err"; then
  echo "a float32 file was accepted"; exit 1
fi
cat "$work/err"
grep -q "float: file://$work/bucket/float.npy is not a numpy_bitmap file" "$work/err"
# A server that ignores range requests (Python's http.server) would send whole files: refused.
(cd "$work/bucket" && exec /usr/bin/python3 -u -m http.server --bind 127.0.0.1 0 >"$work/http.log" 2>&1) &
server=$!
for _ in $(seq 50); do port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$work/http.log"); [ -n "$port" ] && break; sleep 0.1; done
rm -rf "$work/out"
if QUICKDRAW_URL=http://127.0.0.1:$port QUICKDRAW_DIR=$work/out timeout 60 bash "$here/datasets/download_quickdraw.sh" \
  "$work/list.txt" 10 2>"$work/err"; then
  kill $server; echo "a server without range requests was accepted"; exit 1
fi
kill $server
cat "$work/err"
grep -q "apple: cannot fetch the first 4096 bytes of http://127.0.0.1:$port/apple.npy (a server without range requests?)" "$work/err"

# A class name that leaves the folder, or that a URL would carry as something else, is refused
# before anything is fetched or written; a CRLF list's \r is no part of a name.
mkdir -p "$work/deep/a/b"
for bad in '../../OUTSIDE' 'apple?x=1' 'a%2fb'; do
  printf 'apple\r\n%s\r\n' "$bad" >"$work/bad.txt"
  if QUICKDRAW_URL=file://$work/bucket QUICKDRAW_DIR=$work/deep/a/b bash "$here/datasets/download_quickdraw.sh" \
    "$work/bad.txt" 5 2>"$work/err"; then
    echo "class name $bad was accepted"; exit 1
  fi
  cat "$work/err"
  grep -q "has a character outside letters, digits, space, _ and -" "$work/err"
  [ -z "$(find "$work/deep" -name '*.npy*')" ] || { echo "class name $bad: files were written"; exit 1; }
done
printf 'apple\r\n' >"$work/crlf.txt"
QUICKDRAW_URL=file://$work/bucket QUICKDRAW_DIR=$work/crlf bash "$here/datasets/download_quickdraw.sh" \
  "$work/crlf.txt" 5 >/dev/null 2>"$work/err" || true  # one class: prepare refuses the list
[ -s "$work/crlf/quickdraw/apple.npy" ] || { echo "a CRLF class list fetched no apple.npy"; cat "$work/err"; exit 1; }
echo "download: ok"
