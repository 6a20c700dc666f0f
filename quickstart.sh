#!/usr/bin/env bash
# Set-up and the main job on a fresh Debian 12 machine: installs the Debian packages pitrain
# needs, builds it, prepares a real data set and trains on it under `mpirun -np 2`, then
# evaluates the checkpoint. Data: the Quick Draw files of datasets/download_quickdraw.sh if you
# fetched them (datasets/quickdraw.h5), else Fashion-MNIST from Debian's dataset-fashion-mnist.
set -euo pipefail
cd "$(dirname "$0")"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else  # Open MPI refuses root unless told twice
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
$sudo apt-get update -q
# chromium, chromium-driver and python3-selenium: the browser test of `pitrain serve` (~90 s, 125 MB)
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  g++ meson ninja-build pkg-config openmpi-bin libopenmpi-dev libeigen3-dev libhdf5-dev libcxxopts-dev nlohmann-json3-dev catch2 \
  libcpp-httplib-dev libopenblas-dev libpng-dev zlib1g-dev python3 python3-h5py hdf5-tools procps time iproute2 dataset-fashion-mnist \
  chromium chromium-driver python3-selenium
# Node and npm for the TensorFlow.js test (test/tfjs.sh, which installs TensorFlow.js itself);
# a machine that has them already (Node from elsewhere conflicts with Debian's npm) keeps its own.
command -v npm >/dev/null || $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm
[ -f build/build.ninja ] || meson setup build
meson compile -C build

data=datasets/quickdraw.h5
if [ ! -f "$data" ]; then
  data=datasets/fashion-mnist.h5
  build/pitrain prepare --idx /usr/share/datasets/fashion-mnist --classes datasets/fashion-mnist.txt --out "$data"
fi
mpirun -np 2 --oversubscribe build/pitrain train --data "$data" --epochs 3 --checkpoint datasets/model.h5 </dev/null
mpirun -np 2 --oversubscribe build/pitrain evaluate --model datasets/model.h5 --data "$data" </dev/null
