#!/usr/bin/env bash
# Two builds of pitrain side by side: images/s of `pitrain train --json` on one rank for the
# models, batches and thread counts the compute benchmark leads with, runs alternating between
# the builds, medians of REPEATS. For refactors that must not cost speed (the rule: within 3 %),
# and for what a mechanism buys (NEW: a build without it). BUSY=1: beside a busy neighbour (one
# process spinning on a core), as bench/compute.sh's. CASES="cnn 32 2;mlp 128 2": other cases.
# usage: [BUSY=1] [CASES=...] bench/compare_builds.sh OLD_PITRAIN NEW_PITRAIN [REPEATS] (default 7)
set -euo pipefail
old=$1 new=$2 repeats=${3:-7}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pitrain-compare-XXXXXX)
burner=""
trap '[ -n "$burner" ] && kill $burner 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=bench/bench_data.sh
. "$root/bench/bench_data.sh"
mkdir "$work/new" && ln -s "$(realpath "$new")" "$work/new/pitrain"  # bench_data.sh wants a build folder
prepare_bench_data "$work/new" "$root" "$work/d.h5"

cases=("cnn 32 1" "cnn 32 2" "mlp 8 1" "mlp 8 2" "mlp 128 1")
[ -z "${CASES:-}" ] || IFS=';' read -r -a cases <<<"$CASES"
if [ "${BUSY:-0}" = 1 ]; then
  python3 -c 'while True: pass' &
  burner=$!
fi
for c in "${cases[@]}"; do
  read -r model batch threads <<<"$c"
  steps=$((24000 / batch))
  for r in $(seq "$repeats"); do
    for side in old new; do
      bin=$old; [ $side = new ] && bin=$new
      "$bin" train --data "$work/d.h5" --model "$model" --batch-size "$batch" --threads "$threads" --epochs 1 \
        --steps-per-epoch $steps --seed "$r" --json | tail -n 1 >>"$work/$side-$model-$batch-$threads"
    done
  done
done

python3 - "$work" "$repeats" "$bench_data" "${cases[@]}" <<'PY'
import json, os, statistics, sys
work, repeats, data, cases = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def med(name):
    return statistics.median(json.loads(l)["images_per_second"] for l in open(os.path.join(work, name)) if l.strip())
print(f"data: {data}; medians of {repeats} alternating runs, images/s of training steps" +
      ("; beside a busy neighbour" if os.environ.get("BUSY") == "1" else ""))
print()
print("| model | batch | threads | old img/s | new img/s | new / old |")
print("|---|---|---|---|---|---|")
for c in cases:
    model, batch, threads = c.split()
    tag = f"{model}-{batch}-{threads}"
    old, new = med("old-" + tag), med("new-" + tag)
    print(f"| {model} | {batch} | {threads} | {old:.0f} | {new:.0f} | {new / old:.3f} |")
PY
