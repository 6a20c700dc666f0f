#!/usr/bin/env bash
# Debian 12 (bookworm) arm roots under qemu-user: Debian is the base Raspberry Pi OS is built on,
# but this is not Raspberry Pi OS itself and not real Pis. Cross-builds pitrain for arm64 (64-bit)
# or armhf (32-bit, ARMv7 with NEON: cross/armhf.ini) with Debian's crossbuild-essential and the
# cross/ machine files, against a target root of Debian's arm -dev packages (mmdebstrap, cached),
# then runs under qemu-user (binfmt_misc) the Catch2 unit tests, the MPI test at np 2, and a short
# real training run whose loss curve it writes to build-<arch>/curve.csv.
# Usage, as root on Debian 12: test/arm.sh arm64|armhf [--unit]   (--unit: the unit tests only)
# The root is kept in $PITRAIN_ARM_CACHE (default /var/cache/pitrain-arm), the build in build-<arch>/.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-}
case "$arch" in
  arm64) triplet=aarch64-linux-gnu qemu=aarch64 ;;
  armhf) triplet=arm-linux-gnueabihf qemu=arm ;;
  *) echo "usage: test/arm.sh arm64|armhf [--unit]" >&2; exit 2 ;;
esac
unit_only=false
if [ "${2:-}" = --unit ]; then unit_only=true; elif [ -n "${2:-}" ]; then echo "test/arm.sh: unknown option $2; use --unit" >&2; exit 2; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "test/arm.sh: run it as root: it installs packages, mounts binfmt_misc and builds a target root" >&2
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# qemu-user has no process_vm_readv (ENOSYS): Open MPI's shared memory must copy through its buffers.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
step() { echo "== test/arm.sh $arch: $* ($(date -u +%T))"; }

# shellcheck source=test/debian_root.sh
. test/debian_root.sh

step "host packages"
retry apt-get update -q
list=$(./packages.sh arm)
mapfile -t packages <<<"$list"
retry env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${packages[@]}" "crossbuild-essential-$arch"

step "binfmt_misc"
if ! mountpoint -q /proc/sys/fs/binfmt_misc && ! mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc; then
  echo "test/arm.sh: cannot mount binfmt_misc (a container without privileges?); qemu-user needs it" >&2
  exit 1
fi
update-binfmts --enable "qemu-$qemu"

# The target root: bookworm's $arch packages of the lib kind (the libraries the build links).
cache=${PITRAIN_ARM_CACHE:-/var/cache/pitrain-arm}
root=$cache/bookworm-$arch
packages=$(./packages.sh lib | paste -sd, -)
if [ "$(cat "$root/.pitrain-packages" 2>/dev/null)" != "$packages" ]; then
  step "target root $root (a few minutes, once)"
  make_bookworm_root "$root" --architectures="$arch" --include="$packages"
  # The cross linker and qemu see the root from outside: its absolute symlinks (update-alternatives'
  # BLAS and LAPACK ones) would point into the host, so they are made relative.
  find "$root" -type l -lname '/*' | while read -r link; do
    ln -sfn "$(realpath -s -m --relative-to="$(dirname "$link")" "$root$(readlink "$link")")" "$link"
  done
  echo "$packages" > "$root/.pitrain-packages"
fi
# Every arm program (the tests, and mpirun's children) loads its libraries from the root.
export QEMU_LD_PREFIX=$root
run() { "$@"; }
if [ "$arch" = armhf ]; then
  # A 32-bit Open MPI cannot talk to the host's 64-bit mpirun and orted (their messages carry
  # native sizes): armhf programs run inside the root (chroot) with its own mpirun and orted, all
  # under qemu, with this tree, /proc, /sys, /dev and the data bind-mounted at the same paths.
  # Under qemu-user a 32-bit readdir() fails (EOVERFLOW) on the 64-bit directory cookies of the
  # host's ext4 (a real 32-bit kernel hands out 32-bit ones), so Open MPI would find none of its
  # components: their folder is served from a tmpfs copy.
  # Unmounted on exit: a bind-mounted /dev or source tree must not stay inside a cache folder.
  mounts=()
  trap 'for m in "${mounts[@]}"; do umount -R -l "$m"; done' EXIT
  mca=$root/usr/lib/$triplet/openmpi/lib/openmpi3 shm=/dev/shm/pitrain-mca-$arch
  if ! mountpoint -q "$mca"; then
    rm -rf "$shm"
    cp -a "$mca" "$shm"
    mount --bind "$shm" "$mca"
    mounts+=("$mca")
  fi
  for dir in "$PWD" /proc /sys /dev /usr/share/datasets; do
    mkdir -p "$root$dir"
    if ! mountpoint -q "$root$dir"; then
      mount --rbind "$dir" "$root$dir"
      mounts+=("$root$dir")
    fi
  done
  # (PMIx's own components hit the same readdir: it warns that it found no compression.)
  run() { chroot "$root" env -u QEMU_LD_PREFIX PMIX_MCA_pcompress_base_silence_warning=1 "$@"; }
fi

build=build-$arch
if [ ! -f "$build/build.ninja" ]; then
  step "meson setup $build"
  printf "[constants]\nroot = '%s'\n" "$root" > "$cache/root-$arch.ini"
  meson setup "$build" --cross-file "$cache/root-$arch.ini" --cross-file "cross/$arch.ini"
fi
step "build"
meson compile -C "$build" -j 2

step "unit tests under qemu-$qemu"
ran=0
for t in "$build"/test/test_*; do
  [ -f "$t" ] && [ -x "$t" ] && [ "${t##*/}" != test_mpi ] || continue
  echo "-- ${t##*/}"
  run env PITRAIN_SOURCE="$PWD" "$PWD/$t"
  ran=$((ran + 1))
done
# Finding no test binary is a failure, not a pass.
[ "$ran" -gt 0 ] || { echo "test/arm.sh: no unit test binary in $build/test; see the build's output above" >&2; exit 1; }
$unit_only && exit 0
step "MPI tests under qemu-$qemu, mpirun -np 2"
run mpirun -np 2 --oversubscribe --bind-to none "$PWD/$build/test/test_mpi"

step "training run under qemu-$qemu, mpirun -np 2"
data=$PWD/$build/fashion-mnist.h5
[ -f "$data" ] || run "$PWD/$build/pitrain" prepare --idx /usr/share/datasets/fashion-mnist \
  --classes "$PWD/datasets/fashion-mnist.txt" --out "$data"
run mpirun -np 2 --oversubscribe --bind-to none "$PWD/$build/pitrain" train --data "$data" --epochs 3 \
  --steps-per-epoch 20 --threads 1 --seed 1 --log "$PWD/$build/curve.csv" </dev/null
cat "$build/curve.csv"
python3 - "$build/curve.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
losses = [float(r["loss"]) for r in rows]
assert len(rows) == 3 and losses[-1] < losses[0], f"no learning: {losses}"
PY
step "ok"
