#!/bin/sh
# Prints the source revision that `pitrain --version` shows. meson.build's vcs_tag runs it at every
# build, so a rebuild after a commit shows the new one; mpi_hostfiles/setup_hosts.sh runs it to
# give the hosts the head's revision.
# - In a git checkout (this tree its top level): the commit's short hash, and "-modified" when
#   tracked files differ from it (untracked ones, such as data and results, do not count).
# - Elsewhere, or where git is missing or refuses the tree (a host that setup_hosts.sh copied the
#   source to, a tarball): the first line of .pitrain-revision at the tree's top, which
#   setup_hosts.sh writes before it copies the tree.
# - Else: unknown.
cd "$(dirname "$0")/../.." || exit 1
if prefix=$(git rev-parse --show-prefix 2>/dev/null) && [ -z "$prefix" ] &&
  rev=$(git rev-parse --short=8 HEAD 2>/dev/null); then
  # status refreshes the index first: a copy with other file times but the same contents is clean
  changes=$(git status --porcelain --untracked-files=no 2>/dev/null) || changes=unreadable
  [ -z "$changes" ] || rev=$rev-modified
  echo "$rev"
elif [ -s .pitrain-revision ]; then
  # a C string in pitrain_revision.h: letters, digits, '.' and '-' only
  rev=$(head -n 1 .pitrain-revision | tr -cd 'A-Za-z0-9.-')
  echo "${rev:-unknown}"
else
  echo unknown
fi
