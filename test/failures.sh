#!/usr/bin/env bash
# Failures while running, on real processes under mpirun: SIGTERM mid-epoch (checkpoint, exit
# 143, resume equals an uninterrupted run, also with the checkpoint on rank 0's disk only), a
# stalled rank (watchdog), kill -9 of one rank (the job ends; resume on fewer ranks), kill -9
# while checkpoints are written (the last one always loads), a stop after an epoch's last step
# (the resumed epoch validates alone; with --json), the log after a resume from an older
# checkpoint, NaN (stops, the checkpoint stays as it was, also with
# int4 gradients), saves by the clock with local SGD, and `pitrain elastic` on this machine
# (an earlier run's checkpoint, SIGHUP), and with stand-ins for mpirun and ssh (a hostfile name
# that is an ssh option, a rank that outlives mpirun, a rank that did not arrive). Needs
# $PITRAIN and h5diff.
set -u
PITRAIN=${PITRAIN:?set PITRAIN to the pitrain binary}
work=$(mktemp -d /tmp/pitrain-fail-XXXXXX)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
mpi() { mpirun -q --oversubscribe --bind-to none "$@" </dev/null; }
# The ranks, by the rank number in their environment: mpirun's command line matches the pattern too.
ranks_of() {
  local pid
  for pid in $(pgrep -f "pitrain train --data $work/d.h5"); do
    grep -qz '^OMPI_COMM_WORLD_RANK=' "/proc/$pid/environ" 2>/dev/null && echo "$pid"
  done
}

python3 - "$work" <<'PY'
import gzip, os, random, struct, sys
d = sys.argv[1]; random.seed(2)
for name, n in (("train", 2000), ("t10k", 200)):
    labels = [random.randrange(3) for _ in range(n)]
    pix = bytearray()
    for c in labels:
        img = [random.randrange(60) for _ in range(784)]
        for y in range(4 + 7 * c, 11 + 7 * c):
            for x in range(4, 24):
                img[y * 28 + x] = 230
        pix += bytes(img)
    with open(os.path.join(d, name + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + pix)
    with open(os.path.join(d, name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(labels))
PY
"$PITRAIN" prepare --idx "$work" --classes a,b,c --out "$work/d.h5" >/dev/null || { echo "prepare failed"; exit 1; }
train=(train --data "$work/d.h5" --model mlp --batch-size 16 --threads 1)
# Epochs of ~1 s on a fast machine (a step ~1 ms): a signal sent 0.3 s into epoch 2 lands mid-run.
spe=1000

# 1. SIGTERM mid-epoch, as Slurm's scancel sends it to every rank.
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 3 --steps-per-epoch "$spe" --checkpoint "$work/full.h5" >/dev/null 2>&1 \
  || { fail "uninterrupted run"; mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 1 --steps-per-epoch 4 2>&1 | tail -5; }
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 3 --steps-per-epoch "$spe" --checkpoint "$work/cut.h5" >"$work/cut.out" 2>&1 &
job=$!
for _ in $(seq 100); do [ -f "$work/cut.h5" ] && break; sleep 0.1; done  # into epoch 2
sleep 0.3
kill -TERM $(ranks_of) 2>/dev/null
wait $job
rc=$?
# mpirun exits 1 whatever its ranks returned; the exit code itself is checked without it below.
if [ $rc -ne 0 ] && grep -q "stopped by SIGTERM after step" "$work/cut.out" && grep -q -- "--resume $work/cut.h5" "$work/cut.out"; then
  ok "SIGTERM: $(grep -o "stopped by SIGTERM after step [0-9]* (epoch [0-9]*, step [0-9]* of $spe)" "$work/cut.out")"
else
  fail "SIGTERM gave exit $rc"; cat "$work/cut.out"
fi
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 3 --steps-per-epoch "$spe" --checkpoint "$work/cut.h5" --resume "$work/cut.h5" \
  >/dev/null 2>&1 || fail "resume after SIGTERM"
h5diff -q "$work/full.h5" "$work/cut.h5" /model_weights && ok "resumed weights equal the uninterrupted run's" \
  || fail "resumed weights differ from the uninterrupted run's"
# Only rank 0 reads the checkpoint (on Pis it is on rank 0's disk alone): rank 1 runs in a
# folder without it and resumes to the same weights.
mkdir -p "$work/r0" "$work/r1"
cp "$work/full.h5" "$work/r0/ck.h5"
cp "$work/full.h5" "$work/both.h5"
more=(--epochs 4 --steps-per-epoch "$spe")
mpi -np 1 --wdir "$work/r0" "$PITRAIN" "${train[@]}" "${more[@]}" --resume ck.h5 --checkpoint ck.h5 : \
  -np 1 --wdir "$work/r1" "$PITRAIN" "${train[@]}" "${more[@]}" --resume ck.h5 --checkpoint ck.h5 >"$work/r0.out" 2>&1 &&
  mpi -np 2 "$PITRAIN" "${train[@]}" "${more[@]}" --resume "$work/both.h5" --checkpoint "$work/both.h5" >/dev/null 2>&1 &&
  h5diff -q "$work/r0/ck.h5" "$work/both.h5" /model_weights && [ ! -f "$work/r1/ck.h5" ] &&
  ok "resume with the checkpoint on rank 0's disk only" || { fail "resume with the checkpoint on rank 0 only"; cat "$work/r0.out"; }

# A stop after an epoch's last step (asked for through --progress-file's .stop file, there from
# the start; one step an epoch, so every step is an epoch's last): the resumed run validates that
# epoch without training figures, empty in the CSV and absent from its line, never NaN.
touch "$work/p.stop"
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 4 --steps-per-epoch 1 --progress-file "$work/p" --checkpoint "$work/last.h5" \
  >/dev/null 2>&1
rm -f "$work/p.stop"
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 4 --steps-per-epoch 1 --resume "$work/last.h5" --log "$work/last.csv" \
  >"$work/last.out" 2>&1 && grep -q "^[1-3],,,[0-9.]*,[0-9.]*," "$work/last.csv" && grep -q "^Epoch [1-3]/4  0/1 .* val_accuracy" "$work/last.out" &&
  ! grep -h "^Epoch\\|^[0-9]" "$work/last.out" "$work/last.csv" | grep -qi "nan\\|inf" && ok "resume after a stop at an epoch's last step: its validation alone" ||
  { fail "resume after a stop at an epoch's last step"; cat "$work/last.out" "$work/last.csv"; }

# The same at the last epoch's last step, with --json: the stop's words go to stderr (stdout is
# for the JSON line), and the resumed run, which trains no step, still prints its JSON line.
touch "$work/p.stop"
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 2 --steps-per-epoch 1 --progress-file "$work/p" --checkpoint "$work/end.h5" \
  --json >"$work/end.json" 2>"$work/end.err"
rm -f "$work/p.stop"
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 2 --steps-per-epoch 1 --resume "$work/end.h5" --json >"$work/end2.json" 2>&1
if [ ! -s "$work/end.json" ] && grep -q "stopped by SIGTERM after step 2 (epoch 2, step 1 of 1)" "$work/end.err" &&
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["steps"] == 0 and j["images_per_second"] is None, j' \
    "$work/end2.json"; then
  ok "--json: a stop speaks on stderr; a resume with no step left prints its JSON line"
else
  fail "--json at a stop and its resume"; cat "$work/end.json" "$work/end.err" "$work/end2.json"
fi

# A run killed after its log got rows that its checkpoint does not hold (the checkpoint is
# written after the row, and maybe every few epochs): the resume logs those epochs again, in
# their place, not after them.
"$PITRAIN" "${train[@]}" --epochs 1 --steps-per-epoch 5 --checkpoint "$work/log1.h5" --log "$work/again.csv" >/dev/null &&
  "$PITRAIN" "${train[@]}" --epochs 3 --steps-per-epoch 5 --resume "$work/log1.h5" --checkpoint "$work/log3.h5" \
    --log "$work/again.csv" >/dev/null &&
  "$PITRAIN" "${train[@]}" --epochs 3 --steps-per-epoch 5 --resume "$work/log1.h5" --checkpoint "$work/log3b.h5" \
    --log "$work/again.csv" >/dev/null
epochs=$(cut -d, -f1 "$work/again.csv" | tr '\n' ' ')
[ "$epochs" = "epoch 1 2 3 " ] && ok "a resume from an older checkpoint rewrites the log's later rows" ||
  fail "the log after a resume from an older checkpoint has epochs: $epochs"
# Its wall_seconds run on from the kept row's: the job's time over both runs.
walls=$(cut -d, -f9 "$work/again.csv" | tail -n +2 | tr '\n' ' ')
python3 -c 'import sys; w = [float(x) for x in sys.argv[1:]]; assert len(w) == 3 and 0 < w[0] < w[1] < w[2], w' $walls &&
  ok "the log's wall_seconds run on over a resume" || fail "the log's wall_seconds over a resume: $walls"

# In $work: without --checkpoint, pitrain-stopped.h5 goes into the working directory.
(cd "$work" && exec "$PITRAIN" "${train[@]}" --epochs 1000 >"$work/int.out" 2>&1) &
job=$!
sleep 1.5
kill -INT $job
wait $job
rc=$?
[ $rc -eq 130 ] && grep -q "stopped by SIGINT" "$work/int.out" && [ -f "$work/pitrain-stopped.h5" ] \
  && ok "SIGINT without --checkpoint: exit 130, saved pitrain-stopped.h5" || { fail "SIGINT gave exit $rc"; cat "$work/int.out"; }

# 2. A rank that stops responding (SIGSTOP): the others' watchdog ends the job. Budgets far
# beyond the 2 s before the stop (mlp at batch 16 ran 50 epochs of 2,000 images in under 2 s).
start=$(date +%s)
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 1000 --stall-timeout 3 >"$work/stall.out" 2>&1 &
job=$!
sleep 2
for pid in $(ranks_of); do  # stop rank 1
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && kill -STOP "$pid"
done
wait $job
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -lt 30 ] && grep -q "has not completed in [0-9]* s (--stall-timeout)" "$work/stall.out" \
  && grep -q "ranks that had not arrived: 1 (the others waited for them)" "$work/stall.out"; then
  ok "stalled rank: job ended after ${took}s: $(grep -m1 -o 'step [0-9]* stalled; ranks that had not arrived: 1' "$work/stall.out")"
else
  fail "stalled rank: exit $rc after ${took}s"; cat "$work/stall.out"
fi
pkill -KILL -f "pitrain train --data $work/d.h5" 2>/dev/null

# 3. kill -9 of one rank: the job ends within 30 s; the last checkpoint resumes on fewer ranks.
start=$(date +%s)
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 200 --steps-per-epoch 20 --checkpoint "$work/k9.h5" >/dev/null 2>&1 &
job=$!
for _ in $(seq 100); do [ -f "$work/k9.h5" ] && break; sleep 0.1; done
kill -KILL "$(ranks_of | tail -n 1)" 2>/dev/null
wait $job
rc=$?
took=$(($(date +%s) - start))
[ $rc -ne 0 ] && [ $took -lt 30 ] && ok "kill -9 of a rank ended the job in ${took}s" || fail "kill -9: exit $rc after ${took}s"
mpi -np 1 "$PITRAIN" "${train[@]}" --epochs 200 --steps-per-epoch 20 --checkpoint "$work/k9.h5" --resume "$work/k9.h5" \
  --json >"$work/k9.out" 2>&1 && grep -q '"ranks":1,' "$work/k9.out" && ok "resumed on 1 rank" || { fail "resume on fewer ranks"; cat "$work/k9.out"; }

# 4. kill -9 at random moments while a checkpoint is written every step: the file always loads.
bad=0
for i in $(seq 12); do
  "$PITRAIN" "${train[@]}" --epochs 100000 --steps-per-epoch 1 --checkpoint "$work/often.h5" >/dev/null 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))"
  kill -KILL $pid 2>/dev/null
  wait $pid 2>/dev/null
  if [ -f "$work/often.h5" ] && ! "$PITRAIN" evaluate --model "$work/often.h5" --data "$work/d.h5" >/dev/null 2>&1; then
    bad=$((bad + 1))
  fi
done
[ -f "$work/often.h5" ] && [ $bad -eq 0 ] && ok "12 kills while checkpointing: the checkpoint always loaded" \
  || fail "$bad of 12 kills left a checkpoint that does not load"

# 5. NaN: a huge learning rate stops the run, naming the step and layer; the checkpoint is kept.
# Also with the gradients in int4, whose rounding once looked for a scale for NaN forever.
for wire in fp32 int4; do
  cp "$work/full.h5" "$work/nan.h5"
  mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 5 --steps-per-epoch "$spe" --lr 1e30 --resume "$work/nan.h5" \
    --checkpoint "$work/nan.h5" --grad-dtype $wire --stall-timeout 60 >"$work/nan.out" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ "$(grep -c 'pitrain: error' "$work/nan.out")" -eq 1 ] \
    && grep -qE "step [0-9]+ \(epoch 4\): the gradients of dense(_1)? \(the first such layer\) hold NaN or Inf" "$work/nan.out" \
    && h5diff -q "$work/full.h5" "$work/nan.h5"; then
    ok "NaN, $wire gradients: $(grep 'pitrain: error' "$work/nan.out" | cut -c1-110)..."
  else
    fail "NaN, $wire gradients: exit $rc"; cat "$work/nan.out"
  fi
done

# 6. Saves by the clock go on with local SGD, whose ranks vote only at a round: the checkpoint
# is replaced again and again (once, the first clock vote between two rounds was dropped and
# never asked again).
mpi -np 2 "$PITRAIN" "${train[@]}" --epochs 1 --steps-per-epoch 3000 --sync local-sgd --sync-every 4 --checkpoint "$work/clock.h5" \
  --checkpoint-seconds 0.2 >"$work/clock.out" 2>&1 &
job=$!
: >"$work/clock.versions"
while kill -0 $job 2>/dev/null; do
  [ -f "$work/clock.h5" ] && stat -c '%i %.9Y' "$work/clock.h5" >>"$work/clock.versions"
  sleep 0.02
done
wait $job
rc=$?
versions=$(sort -u "$work/clock.versions" | grep -c .)
seconds=$(grep -o ' - [0-9]*s ' "$work/clock.out" | grep -o '[0-9]*' | head -n 1)
# One version a 0.2 s at most: at least half of them in a run of a second or more.
if [ $rc -eq 0 ] && [ "${seconds:-0}" -ge 1 ] && [ "$versions" -ge $((seconds * 5 / 2)) ]; then
  ok "clock saves with local SGD: $versions versions of the checkpoint in ${seconds}s"
elif [ $rc -eq 0 ] && [ "${seconds:-0}" -lt 1 ]; then
  ok "clock saves with local SGD: skipped, the run took under a second ($versions versions)"
else
  fail "clock saves with local SGD: exit $rc, $versions versions of the checkpoint in ${seconds:-?}s"; cat "$work/clock.out"
fi

# 7. pitrain elastic on this machine alone (no ssh: it answers without a probe). A checkpoint
# left at --checkpoint by an earlier run is not this run's: a rank killed before this run's first
# save restarts from scratch, not from the old file. A closed terminal (SIGHUP) stops it with
# this run's checkpoint and ends every rank.
echo "localhost slots=2" >"$work/hosts"
"$PITRAIN" "${train[@]}" --epochs 1 --steps-per-epoch 50 --checkpoint "$work/el.h5" >/dev/null 2>&1
"$PITRAIN" elastic --hostfile "$work/hosts" --probe-timeout 2 --mpirun-args "--oversubscribe --bind-to none" \
  -- "${train[@]}" --epochs 2 --steps-per-epoch 1000000 --checkpoint "$work/el.h5" >"$work/el.out" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q "^pitrain: 2 ranks" "$work/el.out" && break; sleep 0.1; done
sleep 1  # steps reported (the epoch, and so the first save, never ends)
kill -KILL "$(ranks_of | tail -n 1)" 2>/dev/null
for _ in $(seq 300); do grep -q "training again" "$work/el.out" && break; sleep 0.1; done
kill -HUP $job
wait $job
rc=$?
if [ $rc -eq 129 ] && grep -q "checkpoint at 0); resuming on 2 ranks" "$work/el.out" && ! grep -q "resumed after step" "$work/el.out" &&
  grep -q "stopped by SIGHUP; .*el.h5 holds step [0-9]*; continue with" "$work/el.out" && [ -z "$(ranks_of)" ]; then
  ok "elastic: an earlier run's checkpoint is not resumed; SIGHUP: exit 129, $(grep -o 'el.h5 holds step [0-9]*' "$work/el.out")"
else
  fail "elastic on this machine: exit $rc"; cat "$work/el.out"
fi

# 8. What pitrain elastic runs, with stand-ins for mpirun and ssh that record their calls.
fake=$work/fake
mkdir "$fake"
printf '#!/bin/sh\necho "$@" >>%s/calls\n' "$fake" >"$fake/record" && chmod +x "$fake/record"
# A hostfile name that ssh would read as an option is refused, naming its line, before anything runs.
printf 'raspi1 slots=1\n-oProxyCommand=touch${IFS}%s/owned slots=1\n' "$fake" >"$fake/evil"
"$PITRAIN" elastic --hostfile "$fake/evil" --mpirun "$fake/record" --mpirun-args "--mca plm_rsh_agent $fake/record" \
  -- train --checkpoint "$fake/m.h5" >"$fake/evil.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -qF "evil:2: '-oProxyCommand=touch\${IFS}$fake/owned' is not a host name or address (letters, digits, . - _ : [ ] % @; not starting with -)" \
  "$fake/evil.out" && [ ! -e "$fake/calls" ] && [ ! -e "$fake/owned" ]; then
  ok "elastic: a hostfile name that is an ssh option is refused; nothing ran"
else
  fail "elastic with a hostfile name that is an ssh option: exit $rc"; cat "$fake/evil.out" "$fake/calls" 2>/dev/null
fi
# Every process of a failed launch ends before the next starts. The first launch leaves a "rank"
# behind in a session of its own (Open MPI's local ranks each have a process group of their own)
# and the temporary file of a checkpoint it was writing, reports step 5 and fails; the second
# records whether that rank and that file are still there.
cat >"$fake/mpirun" <<'SH'
#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --progress-file ] && progress=$2; shift; done
if [ ! -e "$FAKE/rank.pid" ]; then
  setsid sh -c 'echo $$ >"$FAKE/rank.tmp" && mv "$FAKE/rank.tmp" "$FAKE/rank.pid" && exec sleep 300' &
  while [ ! -e "$FAKE/rank.pid" ]; do sleep 0.05; done
  touch "$FAKE/m.h5.tmp.4242.00000000000000ab"
  echo 5 >"$progress"
  sleep 1  # elastic reads the step
  exit 1
fi
kill -0 "$(cat "$FAKE/rank.pid")" 2>/dev/null && echo running >"$FAKE/second" || echo gone >"$FAKE/second"
[ -e "$FAKE/m.h5.tmp.4242.00000000000000ab" ] && echo kept >"$FAKE/temp" || echo removed >"$FAKE/temp"
SH
chmod +x "$fake/mpirun"
FAKE=$fake timeout 60 "$PITRAIN" elastic --hostfile "$work/hosts" --mpirun "$fake/mpirun" -- train --checkpoint "$fake/m.h5" \
  >"$fake/kill.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(cat "$fake/second" 2>/dev/null)" = gone ] && [ "$(cat "$fake/temp" 2>/dev/null)" = removed ] &&
  grep -q "restart 1/3: the job failed (exit 1)" "$fake/kill.out"; then
  ok "elastic: a rank that outlived its mpirun and its half-written checkpoint were gone before the next launch"
else
  fail "elastic: the next launch found the last one's rank '$(cat "$fake/second" 2>/dev/null)'," \
    "its checkpoint's temporary file '$(cat "$fake/temp" 2>/dev/null)', exit $rc"; cat "$fake/kill.out"
  kill -KILL "$(cat "$fake/rank.pid")" 2>/dev/null
fi
# A host whose rank did not arrive (rank 0's stall report names rank 1, on the second host) is
# left out of the next launch, although it answers.
cat >"$fake/stalls" <<'SH'
#!/bin/sh
n=$(cat "$FAKE/launches" 2>/dev/null || echo 0)
echo $((n + 1)) >"$FAKE/launches"
while [ $# -gt 0 ]; do
  [ "$1" = --hostfile ] && cp "$2" "$FAKE/hosts.$n"
  [ "$1" = --progress-file ] && progress=$2
  shift
done
[ "$n" -gt 0 ] && exit 0
echo "1 " >"$progress.stalled" && exit 1
SH
chmod +x "$fake/stalls"
printf 'localhost slots=1\n127.0.0.2 slots=1\n' >"$fake/two"
FAKE=$fake timeout 60 "$PITRAIN" elastic --hostfile "$fake/two" --mpirun "$fake/stalls" -- train --checkpoint "$fake/m.h5" \
  >"$fake/stalls.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(cat "$fake/hosts.1" 2>/dev/null)" = "localhost slots=1" ] &&
  grep -q "restart 1/3: the job failed (exit 1); lost no host (all answer); leaving out 127.0.0.2 (answers, but its rank did not arrive; asked again in [0-9]* s)" "$fake/stalls.out"; then
  ok "elastic: the host of a rank that did not arrive was left out of the next launch"
else
  fail "elastic with a rank that did not arrive: exit $rc, next hostfile '$(cat "$fake/hosts.1" 2>/dev/null)'"; cat "$fake/stalls.out"
fi

# A full disk (a 4 MB file-size limit, the least under which MPI starts; SIGXFSZ ignored, so that
# writes fail with EFBIG as on a full disk; one process: mpirun's children take signals back to
# their defaults): prepare and a checkpoint each exit 1 naming the user's file, leave the file
# there as it was and no part of the new one.
full_disk() {  # EXPECTED_FILE COMMAND...: run under the limit, check as above
  local file=$1; shift
  local before rc
  before=$(md5sum <"$file")
  (ulimit -f 4096; trap '' XFSZ; exec "$PITRAIN" "$@" </dev/null >"$work/full.out" 2>"$work/full.err")
  rc=$?
  if [ "$rc" -eq 1 ] && [ "$(md5sum <"$file")" = "$before" ] &&
    grep -qx "pitrain: error: $file: .*; $file is left as it was" "$work/full.err" &&
    [ -z "$(ls "$file".tmp.* 2>/dev/null)" ]; then
    ok "a full disk under $1: exit 1, $file as it was"
  else
    fail "a full disk under $1: exit $rc, $(ls "$file"* | tr '\n' ' ')"; cat "$work/full.err"
  fi
}
mkdir "$work/big"  # 6000 images: 4.7 MB
python3 - "$work/big" <<'PY'
import os, struct, sys
for name, n in (("train", 6000), ("t10k", 100)):
    with open(os.path.join(sys.argv[1], name + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + os.urandom(n * 784))
    with open(os.path.join(sys.argv[1], name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(i % 3 for i in range(n)))
PY
cp "$work/d.h5" "$work/old.h5"
full_disk "$work/old.h5" prepare --idx "$work/big" --out "$work/old.h5" --classes a,b,c
echo "an earlier checkpoint" >"$work/old-ckpt.h5"
full_disk "$work/old-ckpt.h5" train --data "$work/d.h5" --model "flatten dense(1024,relu) dense(classes,softmax)" \
  --epochs 1 --steps-per-epoch 2 --threads 1 --checkpoint "$work/old-ckpt.h5"

echo "failures: $failures failure(s)"
[ "$failures" -eq 0 ]
