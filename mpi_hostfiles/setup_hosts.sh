#!/usr/bin/env bash
# Sets up every host of a hostfile over ssh, in one step: installs the Debian / Raspberry Pi OS
# packages, copies this source tree to the same path and builds it there, and copies the
# dataset to the same path, so that `mpirun --hostfile FILE` finds both on every host.
# usage: mpi_hostfiles/setup_hosts.sh HOSTFILE [--data FILE] [--user NAME] [--dry-run]
#   --dry-run prints the commands instead of running them. Needs passwordless ssh and sudo.
set -euo pipefail
hostfile=${1:?usage: setup_hosts.sh HOSTFILE [--data FILE] [--user NAME] [--dry-run]}
shift
data="" user="" dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift ;;
    --user) user=$2@; shift ;;
    --dry-run) dry=1 ;;
    *) echo "setup_hosts.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -f "$hostfile" ] || { echo "setup_hosts.sh: $hostfile: no such hostfile" >&2; exit 2; }
[ -z "$data" ] || [ -f "$data" ] || { echo "setup_hosts.sh: --data $data: no such file" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
packages="g++ meson ninja-build pkg-config openmpi-bin libopenmpi-dev libeigen3-dev libhdf5-dev libcxxopts-dev \
catch2 libopenblas-dev libpng-dev zlib1g-dev rsync"  # the same names on Debian 12 and Raspberry Pi OS 12
run() {
  if [ "$dry" = 1 ]; then printf '%q ' "$@"; echo; else "$@"; fi
}
for host in $(awk '!/^#/ && NF {print $1}' "$hostfile"); do
  echo "== $host" >&2
  run ssh "$user$host" "sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q $packages"
  run ssh "$user$host" "mkdir -p '$src'"
  run rsync -a --delete --exclude 'build*/' --exclude '*.h5' --exclude datasets/quickdraw/ "$src/" "$user$host:$src/"
  run ssh "$user$host" "cd '$src' && { [ -f build/build.ninja ] || meson setup build; } && meson compile -C build"
  if [ -n "$data" ]; then
    abs=$(cd "$(dirname "$data")" && pwd)/$(basename "$data")
    run ssh "$user$host" "mkdir -p '$(dirname "$abs")'"
    run rsync -a "$abs" "$user$host:$abs"
  fi
done
