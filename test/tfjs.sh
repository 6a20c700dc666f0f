#!/usr/bin/env bash
# The exported model run by an implementation we did not write: TensorFlow.js' Layers API on its
# pure JavaScript CPU backend (pinned in test/package.json and package-lock.json, installed once
# by `npm ci` into the build folder) loads `pitrain export --tfjs` from memory and predicts 200
# real Fashion-MNIST validation images; every class probability equals `pitrain predict --json`'s
# to 1e-4. Two models: cnn (Conv2D, MaxPooling2D, Flatten, Dropout, Dense) and one with a ReLU
# layer, 'same' padding, a 5x5 kernel and a final dense without softmax; and a model of 32x32
# colour images. keras_layout.py checks
# each checkpoint as Keras' load_weights reads it. Skips (exit 77), saying what it needs, without
# node and npm, the npm registry, python3-h5py or the Fashion-MNIST files.
set -u
PITRAIN=${PITRAIN:?set PITRAIN to the pitrain binary}
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
command -v node >/dev/null && command -v npm >/dev/null || skip "needs node and npm (quickstart.sh installs Debian's nodejs and npm)"
py=$(for p in python3 /usr/bin/python3; do "$p" -c 'import h5py' 2>/dev/null && echo "$p" && break; done)
[ -n "$py" ] || skip "needs python3 with h5py (quickstart.sh installs python3-h5py)"
work=$(mktemp -d /tmp/pitrain-tfjs-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# TensorFlow.js, installed once a lock file; installed.lock is written when node_modules is whole.
cache=${PITRAIN_BUILD:-$here/../build}/tfjs-npm
if ! cmp -s "$here/package-lock.json" "$cache/installed.lock"; then
  rm -rf "$cache" && mkdir -p "$cache" && cp "$here/package.json" "$here/package-lock.json" "$cache/"
  start=$(date +%s)
  if ! (cd "$cache" && timeout 600 npm ci --no-audit --no-fund --ignore-scripts) >"$work/npm" 2>&1; then
    tail -n 5 "$work/npm"; rm -rf "$cache"
    skip "npm ci of test/package-lock.json failed (needs the npm registry)"
  fi
  cp "$here/package-lock.json" "$cache/installed.lock"
  echo "npm ci: TensorFlow.js installed in $(( $(date +%s) - start )) s, $(du -sh "$cache/node_modules" | cut -f1)"
fi
export NODE_PATH=$cache/node_modules

# Real images: the Fashion-MNIST that quickstart.sh prepared, else Debian's files prepared here.
data=$here/../datasets/fashion-mnist.h5
if [ ! -f "$data" ]; then
  [ -d /usr/share/datasets/fashion-mnist ] || skip "needs datasets/fashion-mnist.h5 (quickstart.sh) or Debian's dataset-fashion-mnist"
  "$PITRAIN" prepare --idx /usr/share/datasets/fashion-mnist --classes "$here/../datasets/fashion-mnist.txt" \
    --out "$work/fm.h5" >/dev/null || { echo "FAIL: prepare"; exit 1; }
  data=$work/fm.h5
fi
"$py" -c 'import h5py, numpy, sys; numpy.save(sys.argv[2], h5py.File(sys.argv[1], "r")["/val/images"][:200])' \
  "$data" "$work/val200.npy" || { echo "FAIL: cannot read 200 validation images of $data"; exit 1; }

# check NAME MODEL KERAS_CLASSES KERAS_LAYERS [DATA IMAGES]: train briefly on DATA (Fashion-MNIST),
# export, compare TensorFlow.js with predict --json on IMAGES (its 200 validation images).
check() {
  local name=$1 model=$2 classes=$3 layers=$4 data=${5:-$data} images=${6:-$work/val200.npy}
  "$PITRAIN" train --data "$data" --model "$model" --epochs 1 --steps-per-epoch 60 --threads 1 \
    --checkpoint "$work/$name.h5" --json </dev/null >"$work/$name.train" 2>&1 || { fail "$name: train"; cat "$work/$name.train"; return; }
  "$PITRAIN" export --model "$work/$name.h5" --tfjs "$work/$name-tfjs" >"$work/$name.export" 2>&1 \
    && grep -q "wrote $work/$name-tfjs/model.json" "$work/$name.export" || { fail "$name: export"; cat "$work/$name.export"; return; }
  "$PITRAIN" predict --json --model "$work/$name.h5" "$images" >"$work/$name.jsonl" 2>&1 \
    || { fail "$name: predict --json"; cat "$work/$name.jsonl"; return; }
  node "$here/tfjs_predict.js" "$work/$name-tfjs" "$images" "$work/$name.jsonl" 1e-4 >"$work/$name.node" 2>&1
  local rc=$?
  sed "s/^/$name: /" "$work/$name.node" | grep -v "^$name: *$" | grep -iv "node backend\|tfjs-node\|speed things up\|^$name: ====\|^$name: Hi there"
  [ $rc -eq 0 ] || fail "$name: TensorFlow.js disagrees with pitrain predict --json (above)"
  grep -q "layers $classes\$" "$work/$name.node" || fail "$name: TensorFlow.js built other layers than $classes"
  "$py" "$here/keras_layout.py" "$work/$name.h5" "$work/$name-tfjs" "$layers" || fail "$name: Keras layout of the checkpoint"
}

check cnn cnn "Conv2D MaxPooling2D Conv2D MaxPooling2D Flatten Dropout Dense" \
  "conv2d:3x3x1x32,32;max_pooling2d:;conv2d_1:3x3x32x64,64;max_pooling2d_1:;flatten:;dropout:;dense:1600x10,10"
check mixed "conv2d(8,3,same) relu maxpool2d conv2d(16,5) flatten dense(32,relu) dropout(0.25) dense(classes)" \
  "Conv2D ReLU MaxPooling2D Conv2D Flatten Dense Dropout Dense Activation" \
  "conv2d:3x3x1x8,8;re_lu:;max_pooling2d:;conv2d_1:5x5x8x16,16;flatten:;dense:1600x32,32;dropout:;dense_1:32x10,10"
# Three channels: 32x32 colour images of three classes, made here.
mkdir -p "$work/rgb"
"$py" "$here/rgb_classes.py" "$work/rgb" 80 1 "$work/rgb-rows.npy" 50 --noise
"$PITRAIN" prepare --npy "$work/rgb" --out "$work/rgb-data.h5" >/dev/null || fail "prepare of 32x32x3 images"
check rgb "conv2d(8,3,relu) maxpool2d flatten dense(classes,softmax)" "Conv2D MaxPooling2D Flatten Dense" \
  "conv2d:3x3x3x8,8;max_pooling2d:;flatten:;dense:1800x3,3" "$work/rgb-data.h5" "$work/rgb-rows.npy"

# The metadata says what the input must be and names the classes.
"$py" - "$work/cnn-tfjs/model.json" <<'PY' || fail "model.json metadata"
import json, sys
meta = json.load(open(sys.argv[1]))["userDefinedMetadata"]
assert len(meta["class_names"]) == 10, meta["class_names"]  # tfjs_predict.js compared them with predict's
assert "(N, 28, 28, 1)" in meta["input"] and "/ 255" in meta["input"], meta["input"]
PY

[ $failures -eq 0 ] && echo "tfjs: ok" || { echo "tfjs: $failures failure(s)"; exit 1; }
