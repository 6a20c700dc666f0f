#!/usr/bin/env bash
# mpi_hostfiles/container/Dockerfile built and run for real, with Debian's podman and no registry:
# the base image is a Debian 12 root made with mmdebstrap (test/debian_root.sh; the pristine root
# test/fresh_hosts.sh keeps is used when it is there), imported with `podman import`, and put in
# place of the Dockerfile's FROM with `podman build --from`. The image then trains 2 ranks with
# mpirun inside one container, as its user, on data mounted from here, and writes a checkpoint;
# `pitrain --version` runs as the image's command line would. The packages of packages.txt's
# kinds fresh and podman are installed first. Runs crun where the machine has cgroup v2 alone,
# runc where it mixes v1 and v2 (crun refuses that), and keeps the machine's rlimits in the
# containers. Needs root; skipped (77) otherwise.
# Takes 4-6 minutes (the image's apt and its build of pitrain), less with the root cached.
# usage: bash test/container.sh
set -u
root=${PITRAIN_SOURCE:-$(cd "$(dirname "$0")/.." && pwd)}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (podman's storage, mmdebstrap)"; exit 77; }
# shellcheck source=test/debian_root.sh
. "$root/test/debian_root.sh"
cd "$root" || exit 1
step() { echo "== $*"; }

step "this machine's tools"
retry apt-get update -q >/dev/null
mapfile -t packages < <(./packages.sh fresh podman)
retry env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}" >/dev/null ||
  { echo "FAIL: apt-get install ${packages[*]}"; exit 1; }
podman=(podman)
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  podman=(podman --runtime runc --cgroup-manager cgroupfs)
fi

base=${PITRAIN_FRESH_CACHE:-/var/cache/pitrain-fresh}/bookworm
if [ ! -f "$base/etc/debian_version" ]; then
  step "a fresh Debian 12 root in $base (once)"
  make_bookworm_root "$base" || { echo "FAIL: mmdebstrap"; exit 1; }
fi
work=$(mktemp -d /tmp/pitrain-container-XXXXXX)
# The containers keep this machine's limits: podman's default ones (open files, processes) may be
# above what a root without CAP_SYS_RESOURCE, as in some VMs and CI containers, may set.
printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf
trap 'rm -rf "$work"; "${podman[@]}" rmi -f localhost/pitrain:test localhost/pitrain-debian:12 >/dev/null 2>&1' EXIT

step "the base image: $base imported"
tar -C "$base" -c . | "${podman[@]}" import - localhost/pitrain-debian:12 >/dev/null ||
  { echo "FAIL: podman import"; exit 1; }

step "podman build of mpi_hostfiles/container/Dockerfile"
start=$SECONDS
if ! "${podman[@]}" build --from localhost/pitrain-debian:12 -f mpi_hostfiles/container/Dockerfile \
  -t localhost/pitrain:test . >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log"
  echo "FAIL: podman build"
  exit 1
fi
echo "built in $((SECONDS - start)) s"

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
run=("${podman[@]}" run --rm)
version=$("${run[@]}" localhost/pitrain:test pitrain --version 2>&1) &&
  echo "ok: pitrain --version in the image: $version" || fail "pitrain --version in the image: $version"

# The data from this machine's Fashion-MNIST, prepared inside the image; the checkpoint comes back.
mkdir -p "$work/data" && chmod 777 "$work/data"
"${run[@]}" -v /usr/share/datasets/fashion-mnist:/fm:ro -v "$work/data:/data" localhost/pitrain:test \
  sh -c 'pitrain prepare --idx /fm --out /data/d.h5 >/dev/null &&
    mpirun -np 2 --bind-to none pitrain train --data /data/d.h5 --model mlp --epochs 2 --steps-per-epoch 50 \
      --threads 1 --checkpoint /data/m.h5' >"$work/train.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^pitrain: 2 ranks" "$work/train.log" && [ -f "$work/data/m.h5" ] &&
  awk '/^Epoch/ { for (i = 1; i < NF; i++) if ($i == "loss:") l[++n] = $(i + 1) } END { exit !(n == 2 && l[2] < l[1]) }' "$work/train.log"; then
  echo "ok: mpirun -np 2 inside the container: $(grep -c '^Epoch' "$work/train.log") epochs, loss falling, checkpoint written"
else
  fail "mpirun -np 2 inside the container: exit $rc"
  cat "$work/train.log"
fi
echo "container tests: $failures failure(s)"
[ $failures -eq 0 ]
