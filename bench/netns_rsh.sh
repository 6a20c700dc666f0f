#!/usr/bin/env bash
# ssh stand-in for Open MPI (--mca plm_rsh_agent) on the emulated cluster of bench/cluster.sh:
# mpirun calls it as `netns_rsh.sh [ssh flags] HOST COMMAND...`. HOST is an emulated host's
# address; its last byte minus 10 is the host number. The command joins the host's CPU cgroup
# first (ip netns exec remounts /sys, which hides the cgroup files), then its network namespace.
# Like ssh, it fails (255) when the host cannot be reached: here, when its link is down.
set -eu
while [ "${1#-}" != "$1" ]; do shift; done  # ssh flags such as -x
host=$1
shift
name=${PITRAIN_CLUSTER:-ptc}-h$((${host##*.} - 10))
if ! ip -n "$name" -o link show dev eth0 2>/dev/null | grep -qE "[<,]LOWER_UP[,>]"; then  # a tap's state is UNKNOWN
  echo "netns_rsh.sh: connect to host $host: No route to host (its link is down)" >&2
  exit 255
fi
echo $$ >"/sys/fs/cgroup/cpu/$name/cgroup.procs"
exec ip netns exec "$name" sh -c "$*"
