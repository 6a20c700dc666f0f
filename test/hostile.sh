#!/usr/bin/env bash
# Hostile input (issue 13): a generator writes each class of bad file in several sizes and values;
# every run, under mpirun -np 2, must exit non-zero within 20 s with one "pitrain: error" line on
# stderr naming the file, no crash text (signal, MPI_ABORT banner, HDF5 error stack, raw C++
# exception), a peak resident memory under 200 MB (GNU time's %M: the largest of mpirun and its
# ranks), and the input files unchanged (checksums before and after). A virtual-memory limit
# (ulimit -v, 2 GB: mpirun and MPI map far more than they use) keeps a regression from taking the
# machine down. Needs $PITRAIN, python3 with h5py (python3-h5py) and GNU time (time).
set -u
PITRAIN=${PITRAIN:?set PITRAIN to the pitrain binary}
work=$(mktemp -d /tmp/pitrain-hostile-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
py=$(for p in python3 /usr/bin/python3; do "$p" -c 'import h5py' 2>/dev/null && echo "$p" && break; done)
[ -n "$py" ] || { echo "hostile: needs python3 with h5py (apt-get install python3-h5py)"; exit 1; }
[ -x /usr/bin/time ] || { echo "hostile: needs GNU time for the peak memory (apt-get install time)"; exit 1; }
in=$work/in  # every input; only outputs go to $work/out
mkdir -p "$in" "$work/out"

# hostile FRAGMENT COMMAND...: the run under mpirun -np 2 fails cleanly with one line holding FRAGMENT,
# its peak under $max_kb KB (200 MB unless set for the call).
hostile() {
  local fragment=$1; shift
  local before after rc start took peak lines
  before=$(cd "$in" && find . -type f -exec md5sum {} + | sort)
  start=$(date +%s)
  (ulimit -v 2000000; /usr/bin/time -f "%M" -o "$work/peak" \
    timeout 20 mpirun -q --oversubscribe --bind-to none -np 2 "$PITRAIN" "$@" </dev/null >"$work/stdout" 2>"$work/err")
  rc=$?
  took=$(($(date +%s) - start))
  after=$(cd "$in" && find . -type f -exec md5sum {} + | sort)
  peak=$(tail -n 1 "$work/peak")
  lines=$(grep -c "pitrain: error" "$work/err")
  local why=""
  [ "$rc" -ne 0 ] || why+=" exit 0;"
  [ "$rc" -ne 124 ] && [ "$took" -lt 20 ] || why+=" took ${took}s;"
  [ "$lines" -eq 1 ] && grep -qF -- "$fragment" "$work/err" || why+=" $lines error lines, expected one holding '$fragment';"
  ! grep -qE "MPI_ABORT|Segmentation|Abort|terminate called|HDF5-DIAG|core dumped|std::|stoull|stoi|out of memory|unexpected failure|Signal" \
    "$work/err" || why+=" crash text;"
  [ "${peak:-999999}" -lt "${max_kb:-200000}" ] 2>/dev/null || why+=" peak ${peak} KB;"
  [ "$before" = "$after" ] || why+=" an input file changed;"
  if [ -n "$why" ]; then
    fail "'$*':$why"; sed 's/^/  | /' "$work/err" | head -n 20
  else
    echo "ok (${took}s, ${peak} KB): $(grep "pitrain: error" "$work/err")"
  fi
}

"$py" "$(dirname "$0")/hostile_files.py" "$in" || { echo "hostile_files.py failed"; exit 1; }

echo "1. usage errors end every rank"
hostile "--out FILE.h5 is required" prepare --npy "$in/npy"
hostile "--val-fraction must be above 0 and below 1" prepare --npy "$in/npy" --out "$work/out/x.h5" --val-fraction 1.5
hostile "--val-fraction must be above 0 and below 1" prepare --npy "$in/npy" --out "$work/out/x.h5" --val-fraction 0
hostile "give exactly one of --npy DIR or --idx DIR" prepare --npy "$in/npy" --idx "$in/idx" --out "$work/out/x.h5"
hostile "--max-per-class must be 0 (all) or positive" prepare --npy "$in/npy" --out "$work/out/x.h5" --max-per-class -1
hostile "class name 'a' is given twice" prepare --npy "$in/npy" --out "$work/out/x.h5" --classes a,b,a
hostile "--classes a: no such file, and one class name is no list" prepare --npy "$in/npy" --out "$work/out/x.h5" --classes a
printf 'a\nb\n' >"$work/out/names.txt"
hostile "--out $work/out/names.txt: is the same file as --classes $work/out/names.txt" prepare --npy "$in/npy" --out "$work/out/names.txt" --classes "$work/out/names.txt"
echo "keep" >"$work/out/y.h5.tmp"
hostile "$in/npy/zebra.npy: cannot open" prepare --npy "$in/npy" --out "$work/out/y.h5" --classes a,zebra
[ "$(cat "$work/out/y.h5.tmp")" = keep ] && echo "ok: an existing OUT.tmp is kept" || fail "prepare removed an existing $work/out/y.h5.tmp"
[ "$(ls "$work/out")" = "$(printf 'names.txt\ny.h5.tmp')" ] || fail "a failed prepare left files: $(ls "$work/out")"
hostile "$in/one: 1 <class>.npy file(s)" prepare --npy "$in/one" --out "$work/out/x.h5"
hostile "$in/npy/zebra.npy: cannot open" prepare --npy "$in/npy" --out "$work/out/x.h5" --classes a,zebra
hostile "predict: give --model FILE.h5" predict "$in/good.pgm"
hostile "evaluate: --split must be train or val" evaluate --model "$in/m.h5" --data "$in/d.h5" --split test
hostile "unknown command 'fit'" fit

echo "4. outputs that are inputs, or folders"
ln -s d.h5 "$in/d-link.h5"
hostile "--checkpoint $in/d.h5: is the same file as --data" train --data "$in/d.h5" --checkpoint "$in/d.h5"
hostile "--checkpoint $in/d-link.h5: is the same file as --data" train --data "$in/d.h5" --checkpoint "$in/d-link.h5"
hostile "--log $in/d.h5: is the same file as --data" train --data "$in/d.h5" --log "$in/d.h5"
hostile "--log $in/m.h5: is the same file as --resume" train --data "$in/d.h5" --resume "$in/m.h5" --log "$in/m.h5" --model mlp --epochs 2
hostile "--checkpoint $work/out: is a folder" train --data "$in/d.h5" --checkpoint "$work/out"
hostile "--log $work/out: is a folder" train --data "$in/d.h5" --log "$work/out"
hostile "--out $in/npy/a.npy: is the same file as --npy" prepare --npy "$in/npy" --out "$in/npy/a.npy"
hostile "--out $in/idx/train-labels-idx1-ubyte: is the same file as --idx" prepare --idx "$in/idx" --out "$in/idx/train-labels-idx1-ubyte"
hostile "--out $work/out: is a folder" prepare --npy "$in/npy" --out "$work/out"
! ls "$work"/out.tmp* >/dev/null 2>&1 || fail "a folder --checkpoint left $(ls -d "$work"/out.tmp*)"

echo "3. damaged checkpoints: every attribute and dataset checked on load, the file named"
for f in "$in"/ckpt/*.h5; do
  hostile "$f: " train --data "$in/d.h5" --resume "$f" --threads 1 --epochs 2
done
for f in "$in"/ckpt/{epoch_step-neg,epoch-array,seed-abc,classes-4,state-1e9}.h5; do
  hostile "$f: " evaluate --model "$f" --data "$in/d.h5"
  hostile "$f: " predict --model "$f" "$in/good.pgm"
done
# A few bytes of model_spec must not make a rank allocate what they describe: every weight's
# presence and shape is checked from the spec's layer shapes before the model is built.
max_kb=64000 hostile "$in/ckpt/spec-wide.h5: dataset /model_weights/dense/dense/kernel:0 has shape (784,256), expected (784,100000)" \
  predict --model "$in/ckpt/spec-wide.h5" "$in/good.pgm"
max_kb=64000 hostile "$in/ckpt/spec-wider.h5: dataset /model_weights/dense/dense/kernel:0 has shape (784,256), expected (784,100000000)" \
  predict --model "$in/ckpt/spec-wider.h5" "$in/good.pgm"
max_kb=64000 hostile "$in/ckpt/spec-only.h5: dataset /model_weights/dense/dense/kernel:0 is missing" \
  evaluate --model "$in/ckpt/spec-only.h5" --data "$in/d.h5"
hostile "$in/activations.h5: its model conv2d(4096,1) flatten dense(3,softmax) run on 256 rows at once needs" \
  evaluate --model "$in/activations.h5" --data "$in/d.h5"
hostile "$in/ckpt/classes-4.h5: its model_spec does not fit its 4 class_names" evaluate --model "$in/ckpt/classes-4.h5" --data "$in/d.h5"
hostile "$in/m.h5: checkpoint holds the model flatten dense(256,relu)" train --data "$in/d.h5" --resume "$in/m.h5" --model cnn
hostile "$in/m.h5: has trained 1 epochs already, --epochs asks for 1; give --epochs above 1" train --data "$in/d.h5" --resume "$in/m.h5" --checkpoint "$work/out/next.h5"
[ ! -e "$work/out/next.h5" ] || fail "a resume with nothing left to train wrote $work/out/next.h5"
hostile "the weights hold NaN or Inf (the steps are too large); lower --lr; not saved" train --data "$in/d.h5" --model mlp \
  --optimizer sgd --lr 3e38 --lr-scaling linear --steps-per-epoch 1 --epochs 1 --checkpoint "$work/out/inf.h5"
[ ! -e "$work/out/inf.h5" ] || fail "weights that overflowed were saved in $work/out/inf.h5, which no resume can read"
hostile "--progress-file $in/d.h5: is the same file as --data" train --data "$in/d.h5" --progress-file "$in/d.h5"
hostile "--warmup-epochs must be 0 to 1000000" train --data "$in/d.h5" --warmup-epochs 1e300
hostile "--sync auto chooses --overlap-steps itself" train --data "$in/d.h5" --sync auto --overlap-steps 2
"$PITRAIN" predict --json --model "$in/before-keras.h5" "$in/good.pgm" >"$work/before" 2>&1 \
  && "$PITRAIN" predict --json --model "$in/m.h5" "$in/good.pgm" >"$work/now" 2>&1 && cmp -s "$work/before" "$work/now" \
  && echo "ok: a checkpoint from before the Keras layout predicts as the same in Keras' layout" \
  || fail "a checkpoint from before the Keras layout: $(cat "$work/before")"

echo "2 and 7. datasets that lie, or hold what would be misread"
hostile "sparse-3000000.h5: /train/images declares 2352000000 bytes but the file stores only" train --data "$in/data/sparse-3000000.h5"
hostile "sparse-100000000.h5: /train/images declares 78400000000 bytes" train --data "$in/data/sparse-100000000.h5"
hostile "sparse-3000000.h5: /val/images declares" evaluate --model "$in/m.h5" --data "$in/data/sparse-3000000.h5"
hostile "int8.h5: dataset /train/images must be uint8 pixels (0-255), not int8" train --data "$in/data/int8.h5"
hostile "lzf.h5: /train/images is compressed with the filter 'lzf'" train --data "$in/data/lzf.h5"
hostile "label-2pow32.h5: /train/labels row 7 has label 4294967296" train --data "$in/data/label-2pow32.h5"
hostile "label-big.h5: /train/labels row 7 has label 4611686018427387904" train --data "$in/data/label-big.h5"
hostile "label-neg.h5: /train/labels row 7 has label -1" train --data "$in/data/label-neg.h5"
for f in "$in"/img/*; do
  hostile "$f: " predict --model "$in/m.h5" "$f"
done
hostile "p2-huge.pgm: image is 99999x99999, expected 28x28" predict --model "$in/m.h5" "$in/img/p2-huge.pgm"
hostile "huge.png: image is 40000x40000, expected 28x28" predict --model "$in/m.h5" "$in/img/huge.png"
hostile "p5-over-maxval.pgm: pixel 0 is 200, outside the PGM's 0-15" predict --model "$in/m.h5" "$in/img/p5-over-maxval.pgm"
hostile "zero-rows.npy: holds no images" predict --model "$in/m.h5" "$in/badnpy/zero-rows.npy"
for f in "$in"/badnpy/*.npy; do
  hostile "$f: " predict --model "$in/m.h5" "$f"
done
hostile "neg-rows.npy: shape (-1, 784)" predict --model "$in/m.h5" "$in/badnpy/neg-rows.npy"
hostile "long-header.npy: header of 60086 bytes, over the 10000 that NumPy reads" predict --model "$in/m.h5" "$in/badnpy/long-header.npy"
hostile "bomb.npy: holds more than the 7840 bytes of data its header declares (10 rows): a damaged file, or a gzip bomb" \
  predict --model "$in/m.h5" "$in/bomb/npy/bomb.npy"
hostile "train-images-idx3-ubyte.gz: holds more than the 7840 bytes of data its header declares" \
  prepare --idx "$in/bomb/idx" --out "$work/bomb.h5"

echo "issue 85, 3 and 5. class names from a file, repeated path options"
hostile "names-escape.h5: attribute class_names: class name 0 ('a\\x1b]0;pwned\\x07') holds a control character" \
  train --data "$in/data/names-escape.h5"
! grep -q $'\x1b' "$work/err" || fail "a class name's escape sequence reached the terminal"
hostile "names-c1.h5: attribute class_names: class name 0 ('a\\xc2\\x9b2J') holds a control character" \
  train --data "$in/data/names-c1.h5"
hostile "names-latin1.h5: attribute class_names: class name 0 ('caf\\xe9') holds a control character or is not UTF-8" \
  train --data "$in/data/names-latin1.h5"
hostile "names-long.h5: attribute class_names: class name 0 has 300 bytes; at most 256" train --data "$in/data/names-long.h5"
hostile "names-many.h5: attribute class_names: 1000000 class names; at most 65536" train --data "$in/data/names-many.h5"
hostile "names-40000-dup.h5: attribute class_names: class name '0' is given twice (labels 0 and 40000)" \
  train --data "$in/data/names-40000-dup.h5"
hostile "$in/ckpt/classes-escape.h5: attribute class_names: class name 0 ('a\\x1b]0;pwned\\x07')" \
  predict --model "$in/ckpt/classes-escape.h5" "$in/good.pgm"
! grep -q $'\x1b' "$work/err" || fail "a checkpoint's class name escape sequence reached the terminal"
"$PITRAIN" train --data "$in/data/names-utf8.h5" --model mlp --steps-per-epoch 1 --threads 1 >"$work/stdout" 2>&1 \
  && echo "ok: UTF-8 class names train" || { fail "UTF-8 class names were refused"; head -n 3 "$work/stdout"; }
hostile "--classes: class name '../../OUT' cannot name a .npy file in --npy" \
  prepare --npy "$in/npy" --classes "a,../../OUT" --out "$work/out/x.h5"
hostile "predict: --model is given 2 times; give it once" predict --model "$in/m.h5" --model "$in/tiny.h5" "$in/good.pgm"
hostile "train: --checkpoint is given 2 times; give it once" \
  train --data "$in/d.h5" --checkpoint "$work/out/a.h5" --checkpoint="$work/out/b.h5"
echo "localhost slots=2" >"$work/out/hosts"
"$PITRAIN" elastic --hostfile "$work/out/hosts" -- train --data "$in/d.h5" --checkpoint "$work/out/a.h5" \
  --checkpoint "$work/out/b.h5" --checkpoint-seconds 5 >/dev/null 2>"$work/err"
[ $? -eq 2 ] && grep -q "elastic: --checkpoint is given 2 times in the train arguments; give it once" "$work/err" \
  && echo "ok: elastic refuses a repeated --checkpoint" || { fail "elastic with two --checkpoint"; cat "$work/err"; }

echo "10. predict reads a .npy a batch at a time: a million rows in the memory of a few"
/usr/bin/time -f "%M" -o "$work/peak" timeout 120 "$PITRAIN" predict --model "$in/tiny.h5" "$in/million/zeros.npy" \
  2>"$work/err" | wc -l >"$work/rows"
peak=$(tail -n 1 "$work/peak")
[ "$(cat "$work/rows")" = 1000000 ] && [ "${peak:-999999}" -lt 200000 ] \
  && echo "ok (${peak} KB): predict on a million-row gzip .npy" \
  || { fail "predict on a million-row gzip .npy: $(cat "$work/rows") rows, peak ${peak} KB"; head -n 5 "$work/err"; }

"$PITRAIN" predict --model "$in/tiny.h5" "$in/idx/t10k-images-idx3-ubyte" "$in/npy/a.npy" >"$work/rows" 2>&1 \
  && [ "$(grep -c 't10k-images-idx3-ubyte\[' "$work/rows")" = 20 ] && [ "$(grep -c 'a.npy\[' "$work/rows")" = 40 ] \
  && echo "ok: predict on an IDX image file and a plain .npy, every row" \
  || { fail "predict on an IDX image file and a plain .npy"; head -n 5 "$work/rows"; }

echo "6 and 7. flags: garbage refused, sizes bounded by the machine's memory"
hostile "GB a rank, more than this machine's 2.05 GB of memory" \
  train --data "$in/d.h5" --model "flatten dense(262144,relu) dense(classes,softmax)"  # under ulimit -v 2 GB
hostile "dropout rate '0.5abc' must be in [0, 1)" train --data "$in/d.h5" --model "flatten dropout(0.5abc) dense(classes,softmax)"
hostile "--threads must be 0 (automatic) or 1 to 1024, got 2147483647" train --data "$in/d.h5" --threads 2147483647
hostile "--expect-ranks must be 0 (any) or positive, got -3" train --data "$in/d.h5" --expect-ranks -3
hostile "--bucket-kb must be 1 to 1048576 (1 GB), got 9007199254740993" train --data "$in/d.h5" --bucket-kb 9007199254740993
hostile "--batch-size 100000000 with this model needs" train --data "$in/d.h5" --batch-size 100000000
hostile "GB of memory; use fewer steps an epoch" train --data "$in/d.h5" --steps-per-epoch 1000000000000 --model mlp

echo "prepare without --classes takes every <class>.npy, sorted"
mpirun -q --oversubscribe -np 2 "$PITRAIN" prepare --npy "$in/npy" --out "$work/out/sorted.h5" >"$work/stdout" 2>&1 \
  && grep -q "classes: every <class>.npy in $in/npy, in sorted order" "$work/stdout" \
  && [ "$(grep -E '^(a|b|c) ' "$work/stdout" | cut -c1)" = "$(printf 'a\nb\nc')" ] \
  || { fail "prepare --npy without --classes"; cat "$work/stdout"; }

echo "hostile: $failures failure(s)"
[ "$failures" -eq 0 ]
