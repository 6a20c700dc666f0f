#!/usr/bin/env bash
# What makes four emulated hosts beat one: pitrain's cluster benchmark (bench/cluster.sh) on the
# wlan and ethernet profiles, once per way of synchronising, each against one host. Root only.
# usage: bench/sync_variants.sh [OUT_DIR]   (about 15 minutes; prints one Markdown table)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bench/results-sync}
tune="--tune $root/mpi_hostfiles/slow-links.conf"
# Open MPI's defaults are bench/cluster.sh's own baseline (bench/RESULTS.md).
variants=(
  "ring, no put|cnn|$tune|"
  "ring, no put, bf16 + error feedback|cnn|$tune|--grad-dtype bf16 --error-feedback"
  "ring, no put, bf16, local SGD K=8|cnn|$tune|--grad-dtype bf16 --error-feedback --sync-every 8"
  "ring, no put, bf16, local SGD K=16|mlp|$tune|--grad-dtype bf16 --error-feedback --sync-every 16"
)
mkdir -p "$out"
i=0
for v in "${variants[@]}"; do
  IFS='|' read -r name model mpirun_args train_args <<<"$v"
  i=$((i + 1))
  echo "variant $i: $name ($model)" >&2
  bash "$root/bench/cluster.sh" --no-peer --models "$model" --profiles wlan,ethernet --out "$out/v$i" --max-seconds 100 \
    --mpirun-args "$mpirun_args" --train-args "$train_args" >/dev/null
  sed -n '/^| pitrain/p' "$out/v$i/cluster.md" | sed "s/^| pitrain |/| $name |/" >>"$out/rows.md"
done
{
  echo "| variant | model | link | hosts | time to target s | vs 1 host | ms/step | images/s | MPI share | final val acc |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  cat "$out/rows.md"
} >"$out/sync.md"
rm "$out/rows.md"
cat "$out/sync.md"
