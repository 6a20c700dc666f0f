# Sourced by test/arm.sh and test/fresh_hosts.sh: Debian 12 (bookworm) roots made with mmdebstrap
# from the mirrors this machine's apt uses, retried while a mirror is being synced.

# retry COMMAND...: three tries 30 s apart, then the failure stands.
retry() {
  local i
  for i in 1 2 3; do
    "$@" && return 0
    echo "failed (try $i of 3): $*" >&2
    [ "$i" -lt 3 ] && sleep 30
  done
  return 1
}

# make_bookworm_root DIR [MMDEBSTRAP_OPTION...]: a root of apt and the essential packages in DIR,
# made in DIR.tmp and moved into place whole.
make_bookworm_root() {
  local dir=$1 sources
  shift
  mapfile -t sources < <(apt-get indextargets --format '$(TARGET_OF) $(REPO_URI) $(RELEASE) $(COMPONENT)' |
    awk '$1 == "deb" && $3 ~ /^bookworm/ { print "deb " $2 " " $3 " " $4 }' | sort -u)
  if [ "${#sources[@]}" -eq 0 ]; then
    echo "apt knows no bookworm mirror (apt-get indextargets): add one to /etc/apt/sources.list and run apt-get update" >&2
    return 1
  fi
  mkdir -p "$(dirname "$dir")"
  # A mirror whose security index stays inconsistent (seen for armhf: "File has unexpected size"
  # through every retry) must not block a test: after the retries the root is made from bookworm
  # and bookworm-updates alone, and the function says so.
  if ! retry mmdebstrap_into "$dir.tmp" "$@" -- "${sources[@]}"; then
    mapfile -t sources < <(printf '%s\n' "${sources[@]}" | grep -v -- '-security ')
    echo "WARNING: $dir could not be made with bookworm-security (see above); making it without the" \
      "security updates (the same ABI: fine for tests, not for a real host)" >&2
    mmdebstrap_into "$dir.tmp" "$@" -- "${sources[@]}" || return 1
  fi
  remove_root "$dir"
  mv "$dir.tmp" "$dir"
}

# remove_root DIR: DIR gone, with whatever is mounted inside it unmounted first (an mmdebstrap
# killed mid-way leaves its /proc and /sys mounted there, which rm cannot remove).
remove_root() {
  local dir
  dir=$(realpath -m "$1")
  findmnt -rn -o TARGET | awk -v d="$dir/" 'index($0, d) == 1' | sort -r | while read -r m; do
    umount -l "$m"
  done
  rm -rf "$dir"
}

# mmdebstrap_into DIR [OPTION...] -- SOURCE...
mmdebstrap_into() {
  local dir=$1 options=()
  shift
  while [ "$1" != -- ]; do options+=("$1"); shift; done
  shift
  remove_root "$dir"
  mmdebstrap --variant=apt --aptopt='Acquire::Retries "3"' "${options[@]}" bookworm "$dir" "$@"
}
