# Sourced by the benchmarks: the data they train on, and the peer they measure against.
# bench_data_source ROOT: which data prepare_bench_data makes, without making it: the 15 real Quick
# Draw classes of ../shared/quickdraw when they are there, else Debian's Fashion-MNIST. Sets
# bench_name (quickdraw15 or fashion-mnist), bench_data to a description and bench_classes to
# its number of classes.
bench_data_source() {
  local qd=$1/../shared/quickdraw
  if [ -f "$qd/apple.npy" ]; then
    bench_name=quickdraw15 bench_data="Quick Draw, 15 classes ($qd)" bench_classes=15
  else
    bench_name=fashion-mnist bench_data="Fashion-MNIST" bench_classes=10
  fi
}

# prepare_bench_data BUILD ROOT OUT: prepares that data into OUT (saying so when it is
# Fashion-MNIST), and sets the variables of bench_data_source.
prepare_bench_data() {
  local build=$1 root=$2 out=$3
  bench_data_source "$root"
  if [ "$bench_name" = quickdraw15 ]; then
    "$build/pitrain" prepare --npy "$root/../shared/quickdraw" --classes "$root/datasets/quickdraw15.txt" --out "$out" >/dev/null
  else
    echo "note: no ../shared/quickdraw; using Fashion-MNIST" >&2
    "$build/pitrain" prepare --idx /usr/share/datasets/fashion-mnist --out "$out" >/dev/null
  fi
}

# require_peer PEER: the PyTorch peer script and the Debian packages it needs, or a one-line
# error naming the fix (its runs' output is piped, so a missing module would fail silently).
require_peer() {
  [ -f "$1" ] || { echo "no peer at $1 (set PEER=...)" >&2; exit 1; }
  /usr/bin/python3 -c 'import torch, h5py' 2>/dev/null ||
    { echo "the peer needs python3-torch and python3-h5py: apt-get install python3-torch python3-h5py (or pass --no-peer where the benchmark has it)" >&2; exit 1; }
}
