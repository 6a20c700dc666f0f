#!/bin/sh
# Prints the Debian packages of packages.txt that have one of the kinds named, one a line.
# usage: ./packages.sh KIND...        e.g. ./packages.sh build lib run
set -eu
[ $# -gt 0 ] || { echo "usage: packages.sh KIND... (the kinds are listed in packages.txt)" >&2; exit 2; }
list=$(dirname "$0")/packages.txt
[ -f "$list" ] || { echo "packages.sh: $list: no such file; it comes with the source tree (git checkout packages.txt)" >&2; exit 2; }
awk -v wanted="$*" -v list="$list" '
  BEGIN { n = split(wanted, w, " "); for (i = 1; i <= n; i++) want[w[i]] = 1 }
  /^#/ || NF == 0 { next }
  {
    k = split($1, kinds, ",")
    for (i = 1; i <= k; i++) known[kinds[i]] = 1
    for (i = 1; i <= k; i++) if (kinds[i] in want) { print $2; break }
  }
  END {
    for (kind in want) if (!(kind in known)) {
      printf "packages.sh: no package of kind \"%s\" in %s; see its header for the kinds\n", kind, list > "/dev/stderr"
      exit 2
    }
  }
' "$list"
