#!/usr/bin/env bash
# The pre-flight check before a long run: checks every host of a hostfile over ssh and prints,
# host by host, a line a check with what it found, and for each problem the fix. Then, when
# nothing failed, one training step on all hosts at once with mpirun.
#   ssh        reaches the host without a password (BatchMode)
#   name       the host calls itself by its hostfile name, and its name and the others' resolve
#              there to an address that is not loopback (the 127.0.1.1 trap of a fresh Pi), the
#              same on every host
#   pitrain    the same build as this machine's: `pitrain --version` (revision, modified tree,
#              build options)
#   data       --data at the same path, with this machine's SHA-256
#   memory     available memory, and free disk beside the data (checkpoints, logs)
#   network    the interfaces that are up; more than one is a warning (Open MPI uses them all)
#   clock      within a second of this machine's (logs and timings across hosts)
#   power      a Pi's under-voltage and throttling (vcgencmd get_throttled, else the rpi_volt
#              alarm), and the CPU's temperature where the kernel gives it
# A warning does not stop the run; a failure does, and the script exits 1.
# test/fresh_hosts.sh runs it on fresh Debian roots, healthy and with broken hosts.
set -euo pipefail
usage="usage: check_hosts.sh HOSTFILE --data FILE [--rsh COMMAND] [--mpirun-args S] [--no-mpirun]
  --data FILE       the dataset the runs train on (the same path on every host)
  --rsh COMMAND     the ssh command (default: ssh), e.g. \"ssh -p 2222\"; mpirun uses it too
  --mpirun-args S   more mpirun arguments for the training step, as the runs will give them,
                    e.g. \"--mca btl_tcp_if_include wlan0 --mca oob_tcp_if_include wlan0\"
  --no-mpirun       only the checks over ssh, not the training step across the hosts"
fail() { echo "check_hosts.sh: $*" >&2; exit 2; }
[ $# -gt 0 ] && [ "${1#-}" = "$1" ] || fail "name a hostfile first; $usage"
hostfile=$1
shift
data="" rsh=ssh run_mpirun=1 mpirun_args=""
while [ $# -gt 0 ]; do
  case $1 in
    --data|--rsh|--mpirun-args) [ $# -ge 2 ] || fail "$1 needs a value; $usage" ;;&
    --data) data=$2; shift ;;
    --rsh) rsh=$2; shift ;;
    --mpirun-args) mpirun_args=$2; shift ;;
    --no-mpirun) run_mpirun=0 ;;
    *) fail "unknown option $1; $usage" ;;
  esac
  shift
done
[ -f "$hostfile" ] || fail "$hostfile: no such hostfile"
[ -n "$data" ] || fail "--data FILE is missing: name the dataset the runs train on; $usage"
[ -f "$data" ] || fail "--data $data: no such file on this machine; make it with pitrain prepare"
data=$(cd "$(dirname "$data")" && pwd)/$(basename "$data")
src=$(cd "$(dirname "$0")/.." && pwd)
pitrain=$src/build/pitrain
mine=$("$pitrain" --version) || fail "no pitrain at $pitrain: build it (meson compile -C build)"
# shellcheck source=mpi_hostfiles/hostfile.sh
. "$src/mpi_hostfiles/hostfile.sh"
read_hostfile "$hostfile"
hosts=("${hostfile_hosts[@]}")
read -ra rsh_cmd <<<"$rsh"
setup="mpi_hostfiles/setup_hosts.sh $hostfile --data $data"
[ "$rsh" = ssh ] || setup+=" --rsh '$rsh'"
# A rank needs its slice of the data, the model and Open MPI's buffers: a Pi with less memory
# free than this swaps or is killed. The disk must hold a few checkpoints and logs.
min_memory_mb=300 min_disk_mb=200 max_clock_s=1 hot_celsius=80
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What a host tells of itself, run there by sh: key=value lines. $1 pitrain, $2 the data, then
# the hostfile's names (each resolved there).
read -r -d '' facts_script <<'SH' || true
pitrain=$1 data=$2
shift 2
echo "hostname=$(hostname)"
for name in "$@"; do
  echo "resolve $name=$(getent ahostsv4 "$name" 2>/dev/null | awk 'NR == 1 { print $1 }')"
done
echo "version=$("$pitrain" --version 2>&1 | head -n 1)"
if [ -f "$data" ]; then echo "data=$(sha256sum "$data" | cut -c1-64)"; else echo "data="; fi
echo "memory_mb=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)"
dir=$(dirname "$data")
[ -d "$dir" ] || dir=$HOME
echo "disk_mb=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }') $dir"
ifaces=
for dev in /sys/class/net/*; do
  name=${dev##*/}
  [ "$name" != lo ] && [ "$(cat "$dev/operstate" 2>/dev/null)" = up ] || continue
  case $name in docker*|veth*|virbr*|br-*) continue ;; esac
  ifaces="${ifaces:+$ifaces, }$name"
done
echo "network=$ifaces"
if command -v vcgencmd >/dev/null 2>&1; then
  echo "throttled=$(vcgencmd get_throttled 2>/dev/null | sed -n 's/^throttled=//p')"
fi
for hwmon in /sys/class/hwmon/hwmon*; do
  [ "$(cat "$hwmon/name" 2>/dev/null)" = rpi_volt ] && echo "volt_alarm=$(cat "$hwmon/in0_lcrit_alarm")"
done
[ -r /sys/class/thermal/thermal_zone0/temp ] && echo "temp_mc=$(cat /sys/class/thermal/thermal_zone0/temp)"
true
SH

# Each host's facts and clock, all hosts at once: $work/HOST.facts, $work/HOST.clock (this
# machine's time before, the host's, this machine's after), $work/HOST.err (ssh's words).
bare_name() { local h=${1#*@}; h=${h#[}; echo "${h%]}"; }
names=()
for host in "${hosts[@]}"; do names+=("$(bare_name "$host")"); done
for host in "${hosts[@]}"; do
  (
    before=$(date +%s.%N)
    theirs=$("${rsh_cmd[@]}" -o BatchMode=yes -o ConnectTimeout=10 -- "$host" "date +%s.%N" </dev/null 2>"$work/$host.err") ||
      exit 0
    echo "$before $theirs $(date +%s.%N)" >"$work/$host.clock"
    "${rsh_cmd[@]}" -o BatchMode=yes -- "$host" "sh -s -- $(printf '%q ' "$pitrain" "$data" "${names[@]}")" \
      <<<"$facts_script" >"$work/$host.facts" 2>>"$work/$host.err" || true
  ) &
done
wait
fact() { sed -n "s/^$2=//p" "$work/$1.facts" | head -n 1; }
resolved() { sed -n "s/^resolve $2=//p" "$work/$1.facts" | head -n 1; }
is_address() { [[ $1 =~ ^[0-9.]+$ || $1 == *:* ]]; }

problems=() warnings=0
report() {  # report HOST CHECK ok|warn|FAIL TEXT
  printf '%-14s %-8s %s\n' "$1" "$2" "$([ "$3" = ok ] && echo "ok: $4" || echo "$3: $4")"
  [ "$3" != FAIL ] || problems+=("$1 $2")
  [ "$3" != warn ] || warnings=$((warnings + 1))
}

my_data=$(sha256sum "$data" | cut -c1-64)
echo "check_hosts.sh: ${#hosts[@]} hosts of $hostfile through $rsh; this machine runs $(build_of "$mine")"
for host in "${hosts[@]}"; do
  name=$(bare_name "$host")
  if [ ! -s "$work/$host.clock" ]; then
    said=$(tail -n 1 "$work/$host.err")
    case $said in
      *"resolve hostname"*) fix="add '<its address> $name' to /etc/hosts here (README step 2)" ;;
      *) fix="ssh-copy-id $host (README step 3), then ssh $host hostname" ;;
    esac
    report "$host" ssh FAIL "cannot log in without a password (${said:-no answer}): $fix"
    continue
  fi
  report "$host" ssh ok "logged in without a password"

  # The name: its own, and the address every host finds for it.
  own=$(fact "$host" hostname)
  addresses=""
  for other in "${hosts[@]}"; do
    [ -s "$work/$other.facts" ] || continue
    addresses+="$(resolved "$other" "$name")"$'\n'
  done
  lan=$(grep -v '^127\.' <<<"$addresses" | grep . | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }') || true
  here=$(resolved "$host" "$name")
  if ! is_address "$name" && [ "$own" != "$name" ] && [ "${own%%.*}" != "${name%%.*}" ]; then
    report "$host" name FAIL "calls itself '$own', the hostfile '$name': on $host run sudo hostnamectl set-hostname $name, and put '$name' for '$own' in its /etc/hosts"
  elif [[ $here == 127.* ]]; then
    report "$host" name FAIL "resolves its own name to $here (the 127.0.1.1 trap): in /etc/hosts on $host write '${lan:-<its LAN address>} $name' instead of '$here $name'"
  elif [ -z "$lan" ]; then
    report "$host" name FAIL "no host resolves '$name': add '<its address> $name' to /etc/hosts on every host (README step 2)"
  else
    wrong=()
    for other in "${hosts[@]}"; do
      [ -s "$work/$other.facts" ] || continue
      seen=$(resolved "$other" "$name")
      [ "$seen" = "$lan" ] || wrong+=("$other (${seen:-nothing})")
    done
    if [ "${#wrong[@]}" -gt 0 ]; then
      report "$host" name FAIL "'$name' is $lan on most hosts but not on ${wrong[*]}: write '$lan $name' in their /etc/hosts"
    else
      report "$host" name ok "'$name' is $lan on every host"
    fi
  fi

  theirs=$(fact "$host" version)
  if [ "$(build_of "$theirs")" = "$(build_of "$mine")" ]; then
    report "$host" pitrain ok "the same build"
  elif [[ $theirs != pitrain* ]]; then
    report "$host" pitrain FAIL "cannot run $pitrain (${theirs:-no answer}): $setup"
  else
    report "$host" pitrain FAIL "another build: $(build_of "$theirs"): $setup"
  fi

  sum=$(fact "$host" data)
  if [ "$sum" = "$my_data" ]; then
    report "$host" data ok "$data, the same SHA-256"
  elif [ -z "$sum" ]; then
    report "$host" data FAIL "no $data there: $setup"
  else
    report "$host" data FAIL "$data differs from this machine's (SHA-256 ${sum:0:12}, here ${my_data:0:12}): $setup"
  fi

  memory=$(fact "$host" memory_mb) disk=$(fact "$host" disk_mb)
  if [ "${memory:-0}" -lt "$min_memory_mb" ]; then
    report "$host" memory FAIL "${memory:-?} MB available, under $min_memory_mb MB: stop other programs on $host (a desktop, a browser)"
  elif [ "${disk%% *}" -lt "$min_disk_mb" ] 2>/dev/null; then
    report "$host" memory FAIL "${disk%% *} MB free in ${disk#* }, under $min_disk_mb MB: free some disk on $host"
  else
    report "$host" memory ok "$memory MB available, ${disk%% *} MB free in ${disk#* }"
  fi

  ifaces=$(fact "$host" network)
  if [ -z "$ifaces" ]; then
    report "$host" network FAIL "no network interface up besides lo"
  elif [[ $ifaces == *,* ]]; then
    report "$host" network warn "$ifaces are up, and Open MPI uses them all: pick one with --mca btl_tcp_if_include ${lan%.*}.0/24 --mca oob_tcp_if_include ${lan%.*}.0/24, or turn the other off (docs/pis.md, WLAN or Ethernet)"
  else
    report "$host" network ok "$ifaces"
  fi

  read -r before at after <"$work/$host.clock"
  clock=$(awk -v b="$before" -v t="$at" -v a="$after" -v max="$max_clock_s" \
    'BEGIN { off = t - (b + a) / 2; err = (a - b) / 2; if (off < 0) off = -off
             printf "%.2f %s", off, (off - err > max) ? "far" : "near" }')
  if [ "${clock#* }" = far ]; then
    report "$host" clock FAIL "${clock% *} s off this machine's: sudo timedatectl set-ntp true on $host (and on this machine)"
  else
    report "$host" clock ok "within ${clock% *} s of this machine's"
  fi

  # get_throttled's bits: 0 under-voltage now, 2 throttled now, 16 and 18 the same since boot.
  throttled=$(fact "$host" throttled) volt=$(fact "$host" volt_alarm) temp=$(fact "$host" temp_mc)
  power=ok power_text="no under-voltage or throttling reported"
  if [ -n "$throttled" ] && (((throttled & 0x5) != 0)); then
    power=FAIL power_text="vcgencmd get_throttled = $throttled: under-voltage or throttled now: a 5.1 V 3 A supply, a heatsink or fan"
  elif [ -n "$throttled" ] && (((throttled & 0x50000) != 0)); then
    power=warn power_text="vcgencmd get_throttled = $throttled: under-voltage or throttling since boot: check the supply and cooling"
  elif [ "$volt" = 1 ]; then
    power=FAIL power_text="under-voltage now (rpi_volt alarm): a 5.1 V 3 A supply"
  elif [ -z "$throttled$volt$temp" ]; then
    power_text="nothing reported (not a Pi, or the kernel exposes neither)"
  fi
  if [ -n "$temp" ] && [ "$power" = ok ] && [ "$((temp / 1000))" -ge "$hot_celsius" ]; then
    power=warn power_text="CPU at $((temp / 1000)) C, a Pi throttles at 80-85 C: a heatsink or fan"
  elif [ -n "$temp" ]; then
    power_text+=", CPU at $((temp / 1000)) C"
  fi
  report "$host" power "$power" "$power_text"
done

if [ "${#problems[@]}" -gt 0 ]; then
  echo "check_hosts.sh: ${#problems[@]} problem(s): ${problems[*]/%/;} fix each as its line says; no mpirun step"
  exit 1
fi
if [ "$run_mpirun" = 1 ]; then
  start=$SECONDS
  log=$work/mpirun.log
  read -ra more_args <<<"$mpirun_args"
  if timeout 300 mpirun -np "${#hosts[@]}" --hostfile "$hostfile" --map-by node --bind-to none \
    --mca plm_rsh_agent "$rsh" "${more_args[@]}" "$pitrain" train --data "$data" --epochs 1 --steps-per-epoch 1 \
    --threads 1 </dev/null >"$log" 2>&1; then
    echo "mpirun: ok: 1 training step on all ${#hosts[@]} hosts in $((SECONDS - start)) s"
  else
    echo "mpirun: FAIL: 1 training step on all ${#hosts[@]} hosts did not finish; its last lines:"
    tail -n 5 "$log" | sed 's/^/  /'
    echo "check_hosts.sh: the hosts pass each check alone but not mpirun: see README, troubleshooting"
    exit 1
  fi
fi
note=""
[ "$warnings" -eq 0 ] || note=" ($warnings warning(s) above)"
echo "check_hosts.sh: all ${#hosts[@]} hosts ready$note"
