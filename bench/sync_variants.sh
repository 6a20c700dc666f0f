#!/usr/bin/env bash
# What makes four emulated hosts beat one: pitrain's cluster benchmark (bench/cluster.sh) on the
# wlan and ethernet profiles, once per way of synchronising in bench/sync_variants/default.txt,
# each against one host, every configuration run R times (medians). Root only. A variant whose
# results are already in OUT_DIR (with its line of the variants file in v*/variant.txt, since
# lines move when the file is edited) is not run again. Final accuracies at the full budget:
# bench/sync_accuracy.sh.
# usage: bench/sync_variants.sh [OUT_DIR [R]]   (R = 3: about 30 minutes; prints one Markdown table)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bench/results-sync}
repeat=${2:-3}
mkdir -p "$out"
mapfile -t variants < <(grep -v '^#' "$root/bench/sync_variants/default.txt")
for i in "${!variants[@]}"; do
  IFS='|' read -r name train_args <<<"${variants[$i]}"
  [ -f "$out/v$i/cluster.md" ] && [ "$(cat "$out/v$i/variant.txt" 2>/dev/null)" = "${variants[$i]}" ] && continue
  echo "variant $i: $name" >&2
  bash "$root/bench/cluster.sh" --no-peer --models cnn --profiles wlan,ethernet --out "$out/v$i" --repeat "$repeat" \
    --images 28800 --eval-images 4800 --max-seconds 100 --train-args "$train_args" >/dev/null
  printf '%s\n' "${variants[$i]}" >"$out/v$i/variant.txt"
done
{
  sed -n 1p "$out/v0/cluster.md"
  echo
  echo "| variant | model | link | hosts | time to target s | vs 1 host | ms/step | images/s | MPI share | val acc at 28,800 images |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for i in "${!variants[@]}"; do
    sed -n '/^| pitrain/p' "$out/v$i/cluster.md" | sed "s/^| pitrain |/| ${variants[$i]%%|*} |/"
  done
  for i in "${!variants[@]}"; do  # runs that finished no epoch or failed, if any
    sed -n -e "s/^Runs that finished no epoch in time (left out of the other medians): /${variants[$i]%%|*}: /p" \
      -e "s/^Failed runs ([^)]*): /${variants[$i]%%|*}: failed, /p" "$out/v$i/cluster.md"
  done
} >"$out/sync.md"
cat "$out/sync.md"
