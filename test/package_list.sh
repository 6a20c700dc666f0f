#!/usr/bin/env bash
# The one package list (packages.txt) against what reads and needs it: every dependency() of a
# meson.build has a `lib` row and every `lib` row a dependency(); every installer takes its
# packages from packages.sh and names none of the list's packages itself; every package is known
# to apt (where apt has its lists).
set -uo pipefail
cd "${PITRAIN_SOURCE:-$(dirname "$0")/..}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# dependency('NAME' ...) calls that are required (required : false ones may be missing).
mapfile -t needed < <(git ls-files '*meson.build' 2>/dev/null || find . -name meson.build -not -path './build*')
mapfile -t deps < <(grep -h "dependency('" "${needed[@]}" | grep -v 'required *: *false' |
  grep -o "dependency('[^']*'" | sed "s/dependency('//; s/'//" | sort -u)
mapfile -t provided < <(awk '!/^#/ && NF >= 3 && $1 ~ /(^|,)lib(,|$)/ { print $3 }' packages.txt | sort -u)
[ "${#deps[@]}" -gt 0 ] || fail "found no dependency() in ${needed[*]}"
for dep in "${deps[@]}"; do
  printf '%s\n' "${provided[@]}" | grep -qx -- "$dep" ||
    fail "meson.build needs dependency('$dep'), but packages.txt has no lib row providing it"
done
for dep in "${provided[@]}"; do
  printf '%s\n' "${deps[@]}" | grep -qx -- "$dep" ||
    fail "packages.txt has a lib row for '$dep', which no meson.build asks for"
done

# The installers read the list; a package name written into one of them is a second list.
mapfile -t listed < <(./packages.sh build lib run example test node bench arm fresh container | sort -u)
for installer in quickstart.sh mpi_hostfiles/setup_hosts.sh mpi_hostfiles/container/Dockerfile test/arm.sh test/fresh_hosts.sh; do
  [ -f "$installer" ] || { fail "$installer is missing"; continue; }
  code=$(grep -v '^\s*#' "$installer")
  grep -q 'packages\.sh' <<<"$code" || fail "$installer does not install from packages.sh"
  for package in "${listed[@]}"; do
    [[ $package == *-* ]] || continue  # names such as meson or rsync are also commands
    grep -qw -- "$package" <<<"$code" && fail "$installer names the package $package itself instead of reading packages.txt"
  done
done

# A typo in the list fails here, not on a Pi.
if [ -n "$(find /var/lib/apt/lists -name "*_Packages*" -print -quit 2>/dev/null)" ]; then
  known=$(apt-cache show --no-all-versions "${listed[@]}" 2>/dev/null | sed -n 's/^Package: //p')
  for package in "${listed[@]}"; do
    grep -qxF -- "$package" <<<"$known" || fail "apt knows no package $package (packages.txt)"
  done
else
  echo "SKIP the apt check: apt has no package lists here (apt-get update)"
fi
./packages.sh no-such-kind >/dev/null 2>&1 && fail "packages.sh accepts a kind that packages.txt does not have"

echo "package list: ${#listed[@]} packages, ${#deps[@]} meson dependencies, $failures failures"
[ "$failures" -eq 0 ]
