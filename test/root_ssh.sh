#!/usr/bin/env bash
# ssh stand-in for test/fresh_hosts.sh, for setup_hosts.sh (--rsh), rsync (-e) and Open MPI
# (--mca plm_rsh_agent): `root_ssh.sh [SSH_OPTION...] [--] [USER@]HOST COMMAND...` runs COMMAND
# with /bin/sh in the home directory of the root $PITRAIN_ROOTS/HOST, as ssh runs it on a host:
# under the host's own name (a UTS namespace; the root's /etc/hostname where it has one, else
# HOST), with /proc, /sys and /dev mounted in a mount
# namespace that ends with the command. The network is this machine's (apt reaches the mirror).
# Like ssh, it exits 255 for a host it does not know.
set -eu
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    -[BbcDEeFIiJLlmOopQRSWw]) shift 2 ;;  # ssh's options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: root_ssh.sh [SSH_OPTION...] [--] [USER@]HOST COMMAND..." >&2; exit 255; }
host=${1#*@}
shift
root=${PITRAIN_ROOTS:?root_ssh.sh: PITRAIN_ROOTS names the folder of the hosts\' roots}/$host
if [ ! -d "$root/etc" ]; then
  echo "ssh: Could not resolve hostname $host: Name or service not known" >&2
  exit 255
fi
name=$(cat "$root/etc/hostname" 2>/dev/null) || true
exec unshare --mount --uts --propagation private -- bash -c '
  set -e
  root=$1 host=$2
  shift 2
  hostname "$host"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  exec chroot "$root" /bin/sh -c "cd && $*"' root_ssh.sh "$root" "${name:-$host}" "$@"
