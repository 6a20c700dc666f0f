#!/usr/bin/env bash
# Set-up and the main job on a fresh Debian 12 machine or Raspberry Pi: installs the packages of
# packages.txt, builds pitrain, prepares a real data set and trains on it under `mpirun -np 2`,
# then evaluates the checkpoint. Data: the Quick Draw files of datasets/download_quickdraw.sh if
# you fetched them (datasets/quickdraw.h5), else Fashion-MNIST from Debian's dataset-fashion-mnist.
# usage: bash quickstart.sh [--no-test-packages] [--jobs N]
#   --no-test-packages  skip what only the tests need: their packages (Chromium, Selenium,
#                       Node.js: about 400 MB) and the build of the test programs
#   --jobs N            build with N parallel jobs (1 on a Pi with 1 GB of memory)
set -euo pipefail
cd "$(dirname "$0")"
usage="usage: bash quickstart.sh [--no-test-packages] [--jobs N]"
kinds="build lib run example test" jobs="" targets=""
while [ $# -gt 0 ]; do
  case $1 in
    --no-test-packages) kinds="build lib run example" targets="pitrain:executable" ;;
    --jobs)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "quickstart.sh: --jobs takes a number of jobs, such as --jobs 1; $usage" >&2; exit 2; }
      jobs="-j $2"; shift ;;
    *) echo "quickstart.sh: unknown option $1; $usage" >&2; exit 2 ;;
  esac
  shift
done
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else  # Open MPI refuses root unless told twice
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
apt_install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; }
$sudo apt-get update -q
list=$(./packages.sh $kinds)  # a failure here stops the script, unlike inside <( )
mapfile -t packages <<<"$list"
apt_install "${packages[@]}"
# Node.js for the TensorFlow.js test (test/tfjs.sh installs TensorFlow.js itself); a machine that
# has npm already (Node.js from elsewhere conflicts with Debian's npm) keeps its own.
if [[ $kinds == *test* ]] && ! command -v npm >/dev/null; then
  list=$(./packages.sh node)
  mapfile -t packages <<<"$list"
  apt_install "${packages[@]}"
fi
[ -f build/build.ninja ] || meson setup build
# shellcheck disable=SC2086  # $jobs is empty or two words
meson compile -C build $jobs $targets

data=datasets/quickdraw.h5
if [ ! -f "$data" ]; then
  data=datasets/fashion-mnist.h5
  build/pitrain prepare --idx /usr/share/datasets/fashion-mnist --classes datasets/fashion-mnist.txt --out "$data"
fi
mpirun -np 2 --oversubscribe build/pitrain train --data "$data" --epochs 3 --checkpoint datasets/model.h5 </dev/null
mpirun -np 2 --oversubscribe build/pitrain evaluate --model datasets/model.h5 --data "$data" </dev/null
