#!/usr/bin/env bash
# Every C++ file of the repository is laid out as .clang-format says (clang-format from
# packages.txt). The fix for a failure: clang-format -i FILE.
set -uo pipefail
cd "${PITRAIN_SOURCE:-$(dirname "$0")/..}"
command -v clang-format >/dev/null || { echo "FAIL: no clang-format: apt-get install clang-format (packages.txt)"; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.h')
[ "${#files[@]}" -gt 0 ] || { echo "FAIL: git lists no C++ file here"; exit 1; }
unformatted=()
for file in "${files[@]}"; do
  clang-format --dry-run --Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done
if [ "${#unformatted[@]}" -gt 0 ]; then
  printf 'FAIL: not formatted (clang-format -i FILE): %s\n' "${unformatted[@]}"
  exit 1
fi
echo "format: ${#files[@]} files as .clang-format says"
