#!/usr/bin/env bash
# Sets up every host of a hostfile over ssh, all hosts at once: installs the packages of
# packages.txt (build, lib and run), copies this source tree to the same path and builds pitrain
# there, and copies the dataset to the same path, so that `mpirun --hostfile FILE` finds both on
# every host. The hosts' builds name the head's source revision in `pitrain --version`. Needs
# passwordless ssh to each host, and root or passwordless sudo there.
# test/fresh_hosts.sh runs it on two fresh Debian 12 roots.
set -euo pipefail
usage="usage: setup_hosts.sh HOSTFILE [--data FILE] [--user NAME] [--jobs N] [--rsh COMMAND] [--dry-run]
  --data FILE    copy this dataset to the same path on every host
  --user NAME    log in as NAME (default: as in your ssh config)
  --jobs N       build with N parallel jobs (1 on a Pi with 1 GB of memory)
  --rsh COMMAND  the ssh command, for ssh and rsync (default: ssh), e.g. \"ssh -p 2222\"
  --dry-run      print the commands instead of running them"
fail() { echo "setup_hosts.sh: $*" >&2; exit 2; }
[ $# -gt 0 ] && [ "${1#-}" = "$1" ] || fail "name a hostfile first; $usage"
hostfile=$1
shift
data="" user="" jobs="" rsh=ssh dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --data|--user|--jobs|--rsh) [ $# -ge 2 ] || fail "$1 needs a value; $usage" ;;&
    --data) data=$2; shift ;;
    --user) user=$2@; shift ;;
    --jobs) [[ $2 =~ ^[1-9][0-9]*$ ]] || fail "--jobs takes a number of jobs, such as --jobs 1"; jobs="-j $2"; shift ;;
    --rsh) rsh=$2; shift ;;
    --dry-run) dry=1 ;;
    *) fail "unknown option $1; $usage" ;;
  esac
  shift
done
[ -f "$hostfile" ] || fail "$hostfile: no such hostfile"
[ -z "$data" ] || [ -f "$data" ] || fail "--data $data: no such file"
src=$(cd "$(dirname "$0")/.." && pwd)
read -ra rsh_cmd <<<"$rsh"
list=$("$src/packages.sh" build lib run)  # a failure here stops the script, unlike inside <( )
mapfile -t packages <<<"$list"
[ -z "$data" ] || data=$(cd "$(dirname "$data")" && pwd)/$(basename "$data")

# shellcheck source=mpi_hostfiles/hostfile.sh
. "$src/mpi_hostfiles/hostfile.sh"
read_hostfile "$hostfile"
hosts=("${hostfile_hosts[@]}")

run() {
  if [ "$dry" = 1 ]; then printf '%q ' "$@"; echo; else "$@"; fi
}
remote() {  # remote HOST COMMAND: one shell command line on HOST
  run "${rsh_cmd[@]}" -- "$user$1" "$2"
}
q() { printf '%q' "$1"; }

setup_host() {
  local host=$1
  remote "$host" "s=; [ \"\$(id -u)\" -eq 0 ] || s=sudo; \$s apt-get update -q &&
    \$s env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${packages[*]}"
  remote "$host" "mkdir -p $(q "$src")"
  run rsync -a --delete -e "$rsh" --exclude 'build*/' --exclude '*.h5' --exclude datasets/quickdraw/ \
    "$src/" "$user$host:$src/"
  remote "$host" "cd $(q "$src") && { [ -f build/build.ninja ] || meson setup build; } &&
    meson compile -C build${jobs:+ $jobs} pitrain:executable"
  if [ -n "$data" ]; then
    remote "$host" "mkdir -p $(q "$(dirname "$data")")"
    run rsync -a -e "$rsh" "$data" "$user$host:$data"
  fi
}

# The head's source revision travels with the tree in .pitrain-revision: a host without git (or
# without .git) builds a pitrain whose --version names it (src/cli/revision.sh), so that
# bench/cluster.sh can tell the hosts' builds apart from the head's.
revision=$("$src/src/cli/revision.sh")
if [ "$dry" = 1 ]; then
  echo "echo $(q "$revision") >$(q "$src/.pitrain-revision")"
  for host in "${hosts[@]}"; do echo "== $host"; setup_host "$host"; done
  exit 0
fi
echo "$revision" >"$src/.pitrain-revision"
echo "setup_hosts.sh: setting up ${hosts[*]} at once; each line below starts with its host" >&2
pids=()
for host in "${hosts[@]}"; do
  (set -e; setup_host "$host") > >(sed -u "s/^/[$host] /") 2>&1 &
  pids+=($!)
done
failed=()
for i in "${!hosts[@]}"; do
  wait "${pids[$i]}" || failed+=("${hosts[$i]}")
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "setup_hosts.sh: failed on ${failed[*]}: see the lines starting with [host] above" >&2
  exit 1
fi
echo "setup_hosts.sh: ${hosts[*]} ready: pitrain at $src/build/pitrain${data:+, data at $data}" >&2
