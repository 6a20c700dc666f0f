# Sourced by the benchmarks: the data they train on.
# prepare_bench_data BUILD ROOT OUT: the 15 real Quick Draw classes of ../shared/quickdraw when
# they are there, else Debian's Fashion-MNIST (saying so); sets bench_data to a description.
prepare_bench_data() {
  local build=$1 root=$2 out=$3 qd=$2/../shared/quickdraw
  if [ -f "$qd/apple.npy" ]; then
    "$build/pitrain" prepare --npy "$qd" --classes "$root/datasets/quickdraw15.txt" --out "$out" >/dev/null
    bench_data="Quick Draw, 15 classes ($qd)"
  else
    echo "note: no ../shared/quickdraw; using Fashion-MNIST" >&2
    "$build/pitrain" prepare --idx /usr/share/datasets/fashion-mnist --out "$out" >/dev/null
    bench_data="Fashion-MNIST"
  fi
}
