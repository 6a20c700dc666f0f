#!/usr/bin/env bash
# End-to-end tests of the pitrain binary under mpirun: prepare -> train -> evaluate -> predict on
# small IDX files made here, and the one-line errors for bad input. Needs $PITRAIN (meson sets it).
set -u
PITRAIN=${PITRAIN:?set PITRAIN to the pitrain binary}
work=$(mktemp -d /tmp/pitrain-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
mpi() { timeout 120 mpirun -q --oversubscribe --bind-to none "$@" </dev/null; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_error FRAGMENT COMMAND...: non-zero exit, exactly one "pitrain: error" line holding FRAGMENT.
expect_error() {
  local fragment=$1; shift
  "$@" >"$work/out" 2>"$work/err"
  local rc=$? lines
  lines=$(grep -c "pitrain: error" "$work/err")
  if [ "$rc" -eq 0 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$fragment" "$work/err"; then
    fail "'$*' gave exit $rc and $lines error lines, expected one holding: $fragment"; sed 's/^/  | /' "$work/err"
  else
    echo "ok: $(grep "pitrain: error" "$work/err")"
  fi
}

# Small IDX files: class c is a bright block at a place of its own, plus noise.
python3 - "$work" <<'PY'
import gzip, os, random, struct, sys
d = sys.argv[1]; random.seed(1)
def write(name, n):
    labels = [random.randrange(4) for _ in range(n)]
    pix = bytearray()
    for c in labels:
        img = [random.randrange(60) for _ in range(784)]
        for y in range(2 + 8 * (c % 3), 9 + 8 * (c % 3)):
            for x in range(2 + 8 * (c // 3), 9 + 8 * (c // 3)):
                img[y * 28 + x] = 230
        pix += bytes(img)
    with gzip.open(os.path.join(d, name + "-images-idx3-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + pix)
    with open(os.path.join(d, name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(labels))
    return pix[:784]
write("train", 600)
first = write("t10k", 100)
with open(os.path.join(d, "first.pgm"), "wb") as f:
    f.write(b"P5\n# the first test image\n28 28\n255\n" + first)
# The same image as a PNG drawn dark on white, as a user's own drawing would be.
import zlib
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
rows = b"".join(b"\0" + bytes(255 - v for v in first[r * 28:(r + 1) * 28]) for r in range(28))
with open(os.path.join(d, "first.png"), "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
# And as a drawing app exports it: black strokes whose alpha is the ink, on nothing (RGBA).
rows = b"".join(b"\0" + b"".join(bytes([0, 0, 0, v]) for v in first[r * 28:(r + 1) * 28]) for r in range(28))
with open(os.path.join(d, "first-alpha.PNG"), "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY
printf 'north\neast\nsouth\nwest\n' >"$work/classes.txt"

mpi -np 2 "$PITRAIN" prepare --idx "$work" --classes "$work/classes.txt" --out "$work/d.h5" >"$work/prep" 2>&1 \
  && grep -q "wrote $work/d.h5: 700 images in 4 classes" "$work/prep" || { fail "prepare"; cat "$work/prep"; }

# Rank 0 is prepare's one writer, and the --classes file may be on its disk alone (rank 1 runs
# in a folder without it); a list of names too long to be a file name is still a list.
mkdir -p "$work/elsewhere"
(cd "$work" && mpi -np 1 "$PITRAIN" prepare --idx "$work" --classes classes.txt --out "$work/d0.h5" : \
  -np 1 --wdir "$work/elsewhere" "$PITRAIN" prepare --idx "$work" --classes classes.txt --out "$work/d0.h5") >"$work/prep0" 2>&1 &&
  grep -q "wrote $work/d0.h5: 700 images in 4 classes" "$work/prep0" || { fail "prepare with --classes on rank 0's disk alone"; cat "$work/prep0"; }
"$PITRAIN" prepare --idx "$work" --classes "$(seq -f 'class_name_%03g' 0 29 | paste -sd,)" --out "$work/long.h5" >"$work/prep" 2>&1 &&
  grep -q "in 30 classes" "$work/prep" || { fail "prepare with 30 class names inline"; cat "$work/prep"; }

mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --model "conv2d(8,3,relu) maxpool2d flatten dense(classes,softmax)" \
  --epochs 2 --batch-size 16 --threads 1 --checkpoint "$work/m.h5" --log "$work/log.csv" --json >"$work/train" 2>&1
tail -n 1 "$work/train" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["ranks"] == 2 and j["batch_per_rank"] == 16 and j["steps"] == 2 * 19, j
assert j["val_accuracy"] > 0.9 and j["images_per_second"] > 0 and 0 <= j["mpi_share"] <= 1, j
assert 0 < j["startup_seconds"] < j["job_seconds"], j
' || { fail "train --json"; cat "$work/train"; }
[ "$(wc -l <"$work/log.csv")" -eq 3 ] && head -n 1 "$work/log.csv" | grep -q "^epoch,loss,accuracy,val_loss,val_accuracy,seconds,mpi_seconds,images,wall_seconds$" \
  || fail "train --log"
# The log's wall_seconds: the start-up, then each epoch's seconds added on.
python3 - "$work/log.csv" "$(tail -n 1 "$work/train")" <<'PY' || fail "train --log wall_seconds"
import csv, json, sys
rows, j = list(csv.DictReader(open(sys.argv[1]))), json.loads(sys.argv[2])
start = j["startup_seconds"]
for r in rows:
    start += float(r["seconds"])
    assert abs(float(r["wall_seconds"]) - start) < 1e-3 * start, (r, start)
PY
# PITRAIN_JOB_START: the start-up counts from the launcher's time (here 5 s ago), not from the
# processes' start; a malformed one stops every rank with one line.
PITRAIN_JOB_START=$(awk -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f", now - 5 }') \
  mpi -np 2 -x PITRAIN_JOB_START "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1 --steps-per-epoch 2 \
  --threads 1 --json >"$work/job" 2>&1
tail -n 1 "$work/job" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert 5 <= j["startup_seconds"] < j["job_seconds"] < 65, j
' || { fail "train with PITRAIN_JOB_START"; cat "$work/job"; }
PITRAIN_JOB_START=yesterday expect_error "PITRAIN_JOB_START=yesterday: give the job's start in unix seconds" \
  mpi -np 2 -x PITRAIN_JOB_START "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1

mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1 --steps-per-epoch 5 --threads 1 >"$work/bar" 2>&1
grep -qE "^Epoch 1/1  5/5 \[=+\] - [0-9]+s [0-9]+ms/step - loss: .* - val_accuracy: .* - mpi: [0-9]+% 808KB/step$" "$work/bar" \
  || { fail "progress line"; cat "$work/bar"; }

# 16-bit gradients halve the bytes; local SGD every 4 steps sends a quarter of them, and at the
# end what the rounds left out (int8: a byte a value and a 4-byte scale a block of 256, once).
mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1 --steps-per-epoch 8 --threads 1 --json \
  --grad-dtype bf16 --error-feedback --sync local-sgd --sync-every 4 | tail -n 1 | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
final = (201988 + 255) // 256 * 260 // 8
assert 0 <= j["bytes_per_step"] - 201988 * 2 // 4 - final <= 8, j  # parameter changes in bf16, every 4th step; + the stop vote
assert j["grad_dtype"] == "bf16" and j["sync_every"] == 4, j
' || fail "train --sync-every --grad-dtype"
mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1 --steps-per-epoch 8 --threads 1 --json \
  --grad-dtype fp16 --overlap --bucket-kb 64 | tail -n 1 | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert 0 <= j["bytes_per_step"] - 201988 * 2 <= 8, j  # + the 8-byte stop vote
' || fail "train --grad-dtype fp16 --overlap"

# PowerSGD: the 784x256 kernel as rank-16 factors (784 x 16, then 256 x 16, each column in
# whole blocks of 64: 13 and 4), the rest as it is (its bias, the 256x4 kernel, which would not
# shrink, and its bias: 1,284 values), all in int4 blocks of 256 values, 120 bytes each: two
# allreduces a step, plus the stop vote.
mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1 --steps-per-epoch 8 --threads 1 --json \
  --grad-dtype powersgd | tail -n 1 | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
blocks = lambda n: -(-n // 256) * 120
assert 0 <= j["bytes_per_step"] - blocks(16 * 13 * 64 + 1284) - blocks(16 * 4 * 64) <= 8, j
assert j["allreduces_per_step"] == 3, j
' || fail "train --grad-dtype powersgd"
# --sync auto says what it measured and chose, in the banner and in the JSON (4 ranks sharing a
# 2-core machine mostly get rounds, and with them the allreduce they travel by).
mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1 --steps-per-epoch 4 --threads 1 --sync auto >"$work/auto" 2>&1
grep -qE "^sync auto: (gradients every step|rounds every [0-9]+ steps, (overlapped|blocking|overlapped and applied [0-9]+ steps later,)) in [a-z0-9]+.* \(link: .* an allreduce, [0-9.]+ MB/s\)(; (rounds applied at the next round, then )?K growing \(up to 128\) while the rounds cost a rank over 15 % of its time)?(; rounds by (the binomial tree|Rabenseifner's) allreduce \(an estimated [0-9.]+ ms a round, by (the binomial tree|Rabenseifner's) [0-9.]+ ms\))?$" "$work/auto" \
  || { fail "train --sync auto banner"; cat "$work/auto"; }
mpi -np 4 "$PITRAIN" train --data "$work/d.h5" --model mlp --epochs 1 --steps-per-epoch 4 --threads 1 --sync auto --json \
  | tail -n 1 | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["sync"] == "auto" and j["grad_dtype"] in j["sync_reason"], j
assert (j["sync_every"] == 1) == j["sync_reason"].startswith("gradients every step"), j
assert j["sync_every_last"] >= j["sync_every"], j  # rounds may double K, never shrink it
assert j["allreduce"] == ("" if j["sync_every"] == 1 else "binomial" if "rounds by the binomial tree" in j["sync_reason"] else "rabenseifner"), j
' || fail "train --sync auto --json"

mpi -np 2 "$PITRAIN" evaluate --model "$work/m.h5" --data "$work/d.h5" >"$work/eval" 2>&1
grep -q "val split: 100 images" "$work/eval" && grep -q "^north " "$work/eval" && grep -q "confusion matrix" "$work/eval" \
  || { fail "evaluate"; cat "$work/eval"; }

# The checkpoint on rank 0's disk alone, as training writes it: evaluate reads it there only.
cp "$work/m.h5" "$work/elsewhere/m0.h5"
mkdir -p "$work/elsewhere/r1"
(mpi -np 1 --wdir "$work/elsewhere" "$PITRAIN" evaluate --model m0.h5 --data "$work/d.h5" : \
  -np 1 --wdir "$work/elsewhere/r1" "$PITRAIN" evaluate --model m0.h5 --data "$work/d.h5") >"$work/eval0" 2>&1 &&
  cmp -s "$work/eval" "$work/eval0" || { fail "evaluate with the checkpoint on rank 0's disk alone"; cat "$work/eval0"; }
# A host with another copy of the dataset (a stale one) is named before any step.
"$PITRAIN" prepare --idx "$work" --classes north,east,south,up --out "$work/other.h5" >/dev/null
expect_error "other.h5: rank 1's copy has class 3 named up where rank 0's copy has west; every host needs the same file" \
  mpi -np 1 "$PITRAIN" train --data "$work/d.h5" --epochs 1 : -np 1 "$PITRAIN" train --data "$work/other.h5" --epochs 1

"$PITRAIN" predict --model "$work/m.h5" "$work/first.pgm" "$work/first.png" "$work/first-alpha.PNG" >"$work/pred" 2>&1
grep -qE "first.pgm  (north|east|south|west) [01]\.[0-9]{3}  [a-z]+ [01]\.[0-9]{3}  [a-z]+ [01]\.[0-9]{3}$" "$work/pred" \
  && [ "$(sed -n 1p "$work/pred" | cut -d' ' -f2-)" = "$(sed -n 2p "$work/pred" | cut -d' ' -f2-)" ] \
  && [ "$(sed -n 1p "$work/pred" | cut -d' ' -f2-)" = "$(sed -n 3p "$work/pred" | cut -d' ' -f2-)" ] \
  || { fail "predict (PGM, and the same drawing inverted as PNG and as strokes on a transparent PNG)"; cat "$work/pred"; }

# --json: a line an image, every class, probabilities that sum to 1, the top one as the text's.
"$PITRAIN" predict --json --model "$work/m.h5" "$work/first.pgm" >"$work/pred.json" 2>&1
python3 - "$work/pred.json" "$(sed -n 1p "$work/pred" | awk '{print $2}')" <<'PY' || { fail "predict --json"; cat "$work/pred.json"; }
import json, sys
(line,) = [json.loads(l) for l in open(sys.argv[1])]
p = line["probabilities"]
assert list(p) == ["north", "east", "south", "west"] and abs(sum(p.values()) - 1) < 1e-6, line
assert line["file"].endswith("first.pgm") and line["row"] == 0 and line["class"] == sys.argv[2] == max(p, key=p.get), line
PY

# export: a TensorFlow.js model of the checkpoint (test/tfjs.sh runs it in TensorFlow.js).
"$PITRAIN" export --model "$work/m.h5" --tfjs "$work/web" >"$work/export" 2>&1 && [ -s "$work/web/group1-shard1of1.bin" ] \
  && python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); assert m["userDefinedMetadata"]["class_names"] == ["north", "east", "south", "west"]' \
    "$work/web/model.json" || { fail "export --tfjs"; cat "$work/export"; }

"$PITRAIN" summary --model cnn --classes 10 | grep -q "Total params: 34,826" || fail "summary"

here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/mpi_hostfiles/setup_hosts.sh" "$here/mpi_hostfiles/pis" --dry-run --data "$work/d.h5" >"$work/setup" 2>&1
[ "$(grep -c '^ssh -- raspi[1-4] .*apt-get install .*libhdf5-dev' "$work/setup")" -eq 4 ] &&
  [ "$(grep -c "^rsync -a -e ssh .*d.h5 raspi[1-4]:" "$work/setup")" -eq 4 ] &&
  [ "$(grep -c "meson compile -C build pitrain:executable" "$work/setup")" -eq 4 ] \
  || { fail "setup_hosts.sh --dry-run"; cat "$work/setup"; }
# A hostfile name that ssh would read as an option is refused, naming the line, before any
# command runs: the remote shell records every call.
printf '#!/bin/sh\necho "$@" >>%s\n' "$work/rsh-calls" >"$work/rsh" && chmod +x "$work/rsh"
printf 'raspi1 slots=1\n-oProxyCommand=touch${IFS}%s slots=1\n' "$work/owned" >"$work/evil-hosts"
if bash "$here/mpi_hostfiles/setup_hosts.sh" "$work/evil-hosts" --rsh "$work/rsh" >"$work/setup" 2>&1 ||
  ! grep -q "evil-hosts:2: '-oProxyCommand=.*' is not a host name" "$work/setup" ||
  [ -e "$work/rsh-calls" ] || [ -e "$work/owned" ]; then
  fail "setup_hosts.sh ran with a hostfile name that is an ssh option"; cat "$work/setup"
fi

echo "bad input:"
printf 'not hdf5' >"$work/text.h5"
expect_error "/nonexistent.h5: no such file" mpi -np 2 "$PITRAIN" train --data /nonexistent.h5
expect_error "not an HDF5 file" mpi -np 2 "$PITRAIN" train --data "$work/text.h5"
expect_error "--batch-size must be a positive integer" mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --batch-size 0
expect_error "--epochs must be a positive integer" mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --epochs -1
expect_error "--lr must be a positive number" "$PITRAIN" train --data "$work/d.h5" --lr 0
expect_error "--optimizer rmsprop: use adam or sgd" "$PITRAIN" train --data "$work/d.h5" --optimizer rmsprop
expect_error "--grad-dtype fp8: use fp32, fp16, bf16, int8, int4 or powersgd" "$PITRAIN" train --data "$work/d.h5" --grad-dtype fp8
expect_error "--sync auto chooses --sync-every itself: leave it out, or name a strategy with --sync" "$PITRAIN" train --data "$work/d.h5" --sync auto --sync-every 8
expect_error "--sync every-step: use auto, per-step or local-sgd" "$PITRAIN" train --data "$work/d.h5" --sync every-step
expect_error "--sync-every is local SGD's: add --sync local-sgd" "$PITRAIN" train --data "$work/d.h5" --sync-every 8
expect_error "--outer-momentum must be in [0, 1)" "$PITRAIN" train --data "$work/d.h5" --outer-momentum 1
expect_error "--overlap-steps is local SGD's: add --sync local-sgd" "$PITRAIN" train --data "$work/d.h5" --overlap-steps 2
expect_error "--overlap-steps applies to overlapped rounds: add --overlap" "$PITRAIN" train --data "$work/d.h5" --sync local-sgd --overlap-steps 2
expect_error "--sync-every must be a positive number" mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --sync local-sgd --sync-every 0
expect_error "unknown layer or model 'resnet'" mpi -np 2 "$PITRAIN" train --data "$work/d.h5" --model resnet
expect_error "started as 1 rank(s), but --expect-ranks 4" "$PITRAIN" train --data "$work/d.h5" --expect-ranks 4
expect_error "bogus" "$PITRAIN" train --bogus
expect_error "--checkpoint-every, --checkpoint-every-steps and --checkpoint-seconds need --checkpoint FILE" "$PITRAIN" train --data "$work/d.h5" --checkpoint-seconds 60
expect_error "--checkpoint-every, --checkpoint-every-steps and --checkpoint-seconds need --checkpoint FILE" "$PITRAIN" train --data "$work/d.h5" --checkpoint-every 2
expect_error "--momentum is SGD's: add --optimizer sgd" "$PITRAIN" train --data "$work/d.h5" --momentum 0.9
expect_error "elastic: the train arguments need --checkpoint FILE" "$PITRAIN" elastic --hostfile "$here/mpi_hostfiles/pis" -- train --data "$work/d.h5"
expect_error "elastic: --hostfile FILE is required" "$PITRAIN" elastic -- train --data "$work/d.h5"
expect_error "elastic: leave out --expect-ranks" "$PITRAIN" elastic --hostfile "$here/mpi_hostfiles/pis" -- train --checkpoint m.h5 --expect-ranks 4
expect_error "elastic: --min-hosts 5 but" "$PITRAIN" elastic --hostfile "$here/mpi_hostfiles/pis" --min-hosts 5 -- train --checkpoint m.h5
expect_error "/nonexistent: cannot read the hostfile" "$PITRAIN" elastic --hostfile /nonexistent -- train --checkpoint m.h5
expect_error "unknown command 'fit'" "$PITRAIN" fit
expect_error "serve: --connections 0: use 1-256" "$PITRAIN" serve --model "$work/m.h5" --connections 0
expect_error "serve: --connections 300: use 1-256" "$PITRAIN" serve --model "$work/m.h5" --connections 300
expect_error "cannot write there" "$PITRAIN" train --data "$work/d.h5" --checkpoint /nonexistent/dir/m.h5
expect_error "not a pitrain checkpoint" "$PITRAIN" evaluate --model "$work/d.h5" --data "$work/d.h5"
expect_error "export: give --model FILE.h5 and --tfjs DIR" "$PITRAIN" export --model "$work/m.h5"
expect_error "--tfjs $work/d.h5: cannot make this folder" "$PITRAIN" export --model "$work/m.h5" --tfjs "$work/d.h5"
head -c 3000 "$work/d.h5" >"$work/cut.h5"
expect_error "cut.h5: cannot open as HDF5 (damaged or truncated?)" mpi -np 2 "$PITRAIN" train --data "$work/cut.h5"
head -c 20000 "$work/m.h5" >"$work/cutm.h5"
expect_error "cutm.h5: cannot open as HDF5 (damaged or truncated?)" "$PITRAIN" evaluate --model "$work/cutm.h5" --data "$work/d.h5"
mkdir -p "$work/three"
python3 - "$work" <<'PY'
import struct, sys
d = sys.argv[1]
for name, n in (("train", 30), ("t10k", 0)):
    open(f"{d}/three/{name}-images-idx3-ubyte", "wb").write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + bytes(784 * n))
    open(f"{d}/three/{name}-labels-idx1-ubyte", "wb").write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes([0, 1, 2] * (n // 3)))
PY
# prepare refuses to write a file without a val split; one made otherwise, train refuses.
expect_error "three.h5: the val split would be empty; the t10k-* IDX files hold no images" \
  mpi -np 2 "$PITRAIN" prepare --idx "$work/three" --classes a,b,c --out "$work/three.h5"
h5py=$(for py in python3 /usr/bin/python3; do "$py" -c 'import h5py' 2>/dev/null && echo "$py" && break; done)
"$h5py" - "$work/three.h5" <<'PY'
import h5py, numpy as np, sys
with h5py.File(sys.argv[1], "w") as f:
    f["train/images"] = np.zeros((30, 28, 28), np.uint8); f["train/labels"] = np.arange(30, dtype=np.int32) % 3
    f["val/images"] = np.zeros((0, 28, 28), np.uint8); f["val/labels"] = np.zeros(0, np.int32)
    f.attrs["class_names"] = [b"a", b"b", b"c"]
PY
expect_error "the val split is empty" mpi -np 2 "$PITRAIN" train --data "$work/three.h5"
expect_error "class_names differ from the checkpoint's" "$PITRAIN" evaluate --model "$work/m.h5" --data "$work/three.h5" --split train
expect_error "no train-images-idx3-ubyte" "$PITRAIN" prepare --idx /nonexistent --out "$work/x.h5"
expect_error "image is 2x1, expected 28x28" sh -c "printf 'P2 2 1 255 0 0' >'$work/small.pgm'; '$PITRAIN' predict --model '$work/m.h5' '$work/small.pgm'"

# Images of another shape: 32x32 colour, three classes of coloured squares. prepare takes the
# shape from the .npy files, train builds the model for it, and evaluate, predict, export and
# summary follow the checkpoint's; serve and a 28x28 input refuse it.
mkdir -p "$work/rgb"
"$h5py" "$here/test/rgb_classes.py" "$work/rgb" 120 0 "$work/rgb-rows.npy" 4
rgb_model="conv2d(8,3,relu) maxpool2d flatten dense(classes,softmax)"
if "$PITRAIN" prepare --npy "$work/rgb" --out "$work/rgb.h5" >"$work/rgb.out" 2>&1 &&
  mpi -np 2 "$PITRAIN" train --data "$work/rgb.h5" --model "$rgb_model" --epochs 3 --threads 1 \
    --checkpoint "$work/rgb-m.h5" --json >>"$work/rgb.out" 2>&1 &&
  "$PITRAIN" evaluate --model "$work/rgb-m.h5" --data "$work/rgb.h5" >>"$work/rgb.out" 2>&1 &&
  "$PITRAIN" predict --model "$work/rgb-m.h5" "$work/rgb-rows.npy" >"$work/rgb.pred" 2>&1 &&
  "$PITRAIN" export --model "$work/rgb-m.h5" --tfjs "$work/rgb-tfjs" >>"$work/rgb.out" 2>&1 &&
  "$PITRAIN" summary --model "$rgb_model" --classes 3 --input 32x32x3 >"$work/rgb.summary" 2>&1 &&
  grep -q '"val_accuracy": *0*\.9\|"val_accuracy": *1' "$work/rgb.out" && [ "$(grep -c ' blue ' "$work/rgb.pred")" -eq 4 ] &&
  "$h5py" -c 'import json, sys; layer = json.load(open(sys.argv[1]))["modelTopology"]["model_config"]["config"]["layers"][0]
assert layer["config"]["batch_input_shape"] == [None, 32, 32, 3], layer' "$work/rgb-tfjs/model.json" &&
  grep -q "(None, 30, 30, 8)" "$work/rgb.summary"; then
  echo "ok: 32x32x3 images: prepare, train on 2 ranks, evaluate, predict, export, summary"
else
  fail "32x32x3 images"
  cat "$work/rgb.out" "$work/rgb.pred" "$work/rgb.summary"
fi
expect_error "takes images of 32x32x3; the drawing page makes 28x28x1 drawings" "$PITRAIN" serve --model "$work/rgb-m.h5" --port 0
{ printf 'P5 28 28 255\n'; head -c 784 /dev/zero; } >"$work/blank.pgm"
expect_error "images of 28x28x1, but $work/rgb-m.h5 takes 32x32x3" "$PITRAIN" predict --model "$work/rgb-m.h5" "$work/blank.pgm"
expect_error "--input 32x32x9: give HxWxC" "$PITRAIN" summary --input 32x32x9
"$h5py" - "$work/mixed.h5" <<'PY'
import h5py, numpy as np, sys
with h5py.File(sys.argv[1], "w") as f:
    f["train/images"] = np.zeros((30, 32, 32, 3), np.uint8); f["train/labels"] = np.arange(30, dtype=np.int32) % 3
    f["val/images"] = np.zeros((9, 28, 28), np.uint8); f["val/labels"] = np.arange(9, dtype=np.int32) % 3
    f.attrs["class_names"] = [b"a", b"b", b"c"]
PY
expect_error "/val holds images of 28x28x1, /train of 32x32x3" mpi -np 2 "$PITRAIN" train --data "$work/mixed.h5"

echo "cli: $failures failure(s)"
[ "$failures" -eq 0 ]
