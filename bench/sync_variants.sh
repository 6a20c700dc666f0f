#!/usr/bin/env bash
# What makes four emulated hosts beat one: pitrain's cluster benchmark (bench/cluster.sh) on the
# wlan and ethernet profiles, once per way of synchronising, each against one host. Root only.
# A variant whose results are already in OUT_DIR is not run again.
# usage: bench/sync_variants.sh [OUT_DIR]   (about 20 minutes; prints one Markdown table)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bench/results-sync}
tune="--tune $root/mpi_hostfiles/slow-links.conf"
# name|model|mpirun arguments|train arguments. Open MPI's defaults with per-step fp32 gradients
# are bench/cluster.sh's own baseline (bench/RESULTS.md).
variants=(
  "ring allreduce, no TCP put|cnn|$tune|"
  "bf16 + error feedback|cnn||--grad-dtype bf16 --error-feedback"
  "bf16, local SGD K=8|cnn||--grad-dtype bf16 --error-feedback --sync-every 8"
  "bf16, local SGD K=16|mlp||--grad-dtype bf16 --error-feedback --sync-every 16"
)
mkdir -p "$out"
i=0
for v in "${variants[@]}"; do
  IFS='|' read -r name model mpirun_args train_args <<<"$v"
  i=$((i + 1))
  [ -f "$out/v$i/cluster.md" ] && continue
  echo "variant $i: $name ($model)" >&2
  bash "$root/bench/cluster.sh" --no-peer --models "$model" --profiles wlan,ethernet --out "$out/v$i" --max-seconds 100 \
    --mpirun-args "$mpirun_args" --train-args "$train_args" >/dev/null
done
{
  echo "| variant | model | link | hosts | time to target s | vs 1 host | ms/step | images/s | MPI share | final val acc |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  i=0
  for v in "${variants[@]}"; do
    i=$((i + 1))
    sed -n '/^| pitrain/p' "$out/v$i/cluster.md" | sed "s/^| pitrain |/| ${v%%|*} |/"
  done
} >"$out/sync.md"
cat "$out/sync.md"
