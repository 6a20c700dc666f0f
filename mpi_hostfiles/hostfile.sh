# shellcheck shell=bash
# Sourced by setup_hosts.sh, check_hosts.sh and bench/cluster.sh: the hosts of an Open MPI
# hostfile, and what of `pitrain --version` must be the same on every host.

# read_hostfile FILE: sets hostfile_hosts to FILE's hosts, each once, in order: the first word of
# every line that is not a comment. Only host names and addresses pass (optionally user@): a
# name that ssh would read as an option, or a shell would expand, stops the script through the
# caller's `fail MESSAGE`. The same rule and words as `pitrain elastic` (is_host_name in
# src/elastic/hosts.cpp).
read_hostfile() {
  local line host lineno=0 name_re='^[][A-Za-z0-9._:%@-]+$'
  hostfile_hosts=()
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    read -r host _ <<<"${line%%#*}" || true
    [ -n "$host" ] || continue
    if [[ ! $host =~ $name_re ]] || [ "${host#-}" != "$host" ]; then
      fail "$1:$lineno: '$host' is not a host name or address (letters, digits, . - _ : [ ] % @; not starting with -)"
    fi
    [[ " ${hostfile_hosts[*]:-} " == *" $host "* ]] || hostfile_hosts+=("$host")
  done <"$1"
  [ "${#hostfile_hosts[@]}" -gt 0 ] || fail "$1 names no host"
}

# build_of VERSION: what must be the same on every host: `pitrain --version` without the GEMM
# kernel that each CPU picks at run time.
build_of() {
  local build=${1%%; GEMM on this CPU: *}
  if [ "$build" = "$1" ]; then echo "$1"; else echo "$build)"; fi
}
