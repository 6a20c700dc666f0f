# Sourced by bench/cluster.sh and the tests of the emulated cluster (see bench/cluster.sh's
# header): hosts h1..hN as network namespaces on a bridge, each link shaped, each host a CPU
# quota; mpirun runs in the head namespace and reaches the hosts through bench/netns_rsh.sh.
# Needs $root (the source folder) and $cpu (cores a host). Names carry $PITRAIN_CLUSTER, which
# holds this shell's PID, so runs of other users do not collide.
# shellcheck source=bench/netns_link.sh
. "$root/bench/netns_link.sh"
export PITRAIN_CLUSTER=${PITRAIN_CLUSTER:-ptc$$}  # names of this run's namespaces and cgroups
subnet=10.77.$(($$ % 200)).0
# --latency's frame holder, from the build in $root/build whichever pitrain a run times
delay_program=${PITRAIN_NETNS_DELAY:-$root/build/bench/netns_delay}
net=${subnet%.0}

# latency_micros MS: --latency's milliseconds (a decimal number) in microseconds, or a one-line
# error and exit 2.
latency_micros() {
  [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "--latency $1: give milliseconds, e.g. 2 or 0.5" >&2; exit 2; }
  awk -v ms="$1" 'BEGIN { printf "%d\n", ms * 1000 }'
}

# Boards that --host-speed names: fp32 GEMM GFLOP/s on all 4 cores. Estimates, as twice the
# boards' public fp64 HPL results (a 128-bit NEON FMA holds 4 floats or 2 doubles): Pi 4 (1.5
# GHz) 8-11.4 GFLOP/s (Bill Feiereisen, feiereisen.net, 2022; Jeff Geerling's top500-benchmark,
# CM4), Pi 5 28.5-30.2 (top500-benchmark and its issue 90). No HPL figure of a Pi 3B+ was found:
# its A53 at 1.4 GHz does half an A72's fp32 FMAs a cycle, so about half a Pi 4. docs/clusters.md
# lists them with their sources.
declare -A board_gflops=([pi3b+]=10 [pi4]=20 [pi5]=60)

# host_speed_cpu NAME BUILD: the CPU share (cores) a host gets to compute at board NAME's rate:
# its GFLOP/s over this machine's single-core fp32 GEMM rate, measured once with BUILD's
# bench/compute_bench (512^3, the kernel pitrain takes). Says both on stderr; a one-line error
# and exit 2 for an unknown name or a core slower than the board.
host_speed_cpu() {
  local name=$1 build=$2 gflops core
  gflops=${board_gflops[$name]:-}
  [ -n "$gflops" ] || { echo "--host-speed $name: give pi3b+, pi4 or pi5 (or --cpu CORES)" >&2; exit 2; }
  [ -x "$build/bench/compute_bench" ] ||
    { echo "--host-speed needs $build/bench/compute_bench; build it: ninja -C $build bench/compute_bench" >&2; exit 2; }
  core=$(for _ in 1 2 3; do "$build/bench/compute_bench" --sgemm 512,512,512; done |
    python3 -c 'import json, statistics, sys
print(statistics.median(next(iter(json.loads(l)["sgemm_gflops"].values())) for l in sys.stdin))')
  awk -v g="$gflops" -v c="$core" -v n="$name" 'BEGIN {
    if (g > c) { printf "--host-speed %s: one core of this machine (%.0f GFLOP/s) is slower than a %s (%s); use --cpu\n", n, c, n, g > "/dev/stderr"; exit 2 }
    printf "host speed %s: %s GFLOP/s fp32 GEMM (an estimate) over %.0f GFLOP/s a core here: %.3f core a host\n", n, g, c, g / c > "/dev/stderr"
    printf "%.4f\n", g / c }'
}

namespaces=()
teardown() {
  for ns in "${namespaces[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  for cg in /sys/fs/cgroup/cpu/"$PITRAIN_CLUSTER"-*; do
    [ -d "$cg" ] || continue
    while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done <"$cg/cgroup.procs"
    rmdir "$cg" 2>/dev/null || true
  done
  namespaces=()
}

# make_cluster N MBIT [cell]: hosts h1..hN at $net.11.., a head namespace at $net.2 that runs
# mpirun. Each host has its own MBIT link, or with `cell` all hosts share one WLAN cell of MBIT:
# every frame from a host passes one common tbf bucket (an ifb device in the switch namespace),
# at half the rate, since in infrastructure mode each frame crosses the air twice. With
# $latency_us > 0 every frame a host sends arrives that much later (bench/netns_delay.cpp).
make_cluster() {
  local n=$1 mbit=$2 cell=${3:-} br=$PITRAIN_CLUSTER-br
  if [ "${latency_us:-0}" -gt 0 ] && [ ! -x "$delay_program" ]; then
    echo "bench: --latency needs $delay_program; build it: ninja -C build bench/netns_delay" >&2
    return 2
  fi
  ip netns add "$br"
  namespaces+=("$br")
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  if [ -n "$cell" ]; then
    ip -n "$br" link add ifb0 type ifb
    ip -n "$br" link set ifb0 up
    shape_egress "$br" ifb0 $((mbit / 2))
  fi
  for i in head $(seq "$n"); do
    local ns=$PITRAIN_CLUSTER-h$i addr
    [ "$i" = head ] && addr=$net.2 || addr=$net.$((10 + i))
    ip netns add "$ns"
    namespaces+=("$ns")
    if [ "$i" != head ] && [ "${latency_us:-0}" -gt 0 ]; then  # eth0 is a tap: netns_delay holds its frames
      ip -n "$br" link add "p$i" type veth peer name wire0 netns "$ns"
      ip -n "$ns" link set wire0 up promisc on
      ip -n "$ns" tuntap add dev eth0 mode tap
      setsid -f ip netns exec "$ns" "$delay_program" eth0 wire0 "$latency_us"  # killed by teardown
    else
      ip -n "$br" link add "p$i" type veth peer name eth0 netns "$ns"
    fi
    ip -n "$br" link set "p$i" master br0 up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    use_reno "$ns"
    [ "$i" = head ] && continue
    if [ -n "$cell" ]; then  # the host's frames into the air: the cell's one bucket
      tc -n "$br" qdisc add dev "p$i" handle ffff: ingress
      tc -n "$br" filter add dev "p$i" parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ifb0
    else  # the host's link, both directions: its own egress and its switch port's
      shape_egress "$ns" eth0 "$mbit"
      shape_egress "$br" "p$i" "$mbit"
    fi
    local cg=/sys/fs/cgroup/cpu/$ns
    mkdir -p "$cg"
    # A 10 ms period (a 100 ms one stalls spinning MPI ranks), longer where the quota would be
    # under the kernel's 1 ms minimum.
    local period
    period=$(awk -v c="$cpu" 'BEGIN { p = 10000; if (c * p < 1000) p = int(1000 / c) + 1; print p }')
    echo "$period" >"$cg/cpu.cfs_period_us"
    awk -v c="$cpu" -v p="$period" 'BEGIN { printf "%d\n", c * p }' >"$cg/cpu.cfs_quota_us"
  done
}

# make_profile_cluster N PROFILE: make_cluster for a link profile of bench/cluster.sh: wlan (20
# Mbit/s a host), wlan-cell (one shared 20 Mbit/s cell), ethernet (100), gigabit (1000), RATEmbit.
make_profile_cluster() {
  case $2 in
    wlan) make_cluster "$1" 20 ;;
    wlan-cell) make_cluster "$1" 20 cell ;;
    ethernet) make_cluster "$1" 100 ;;
    gigabit) make_cluster "$1" 1000 ;;
    *[0-9]mbit) make_cluster "$1" "${2%mbit}" ;;
    *) echo "unknown link profile $2 (wlan, wlan-cell, ethernet, gigabit or RATEmbit)" >&2; return 2 ;;
  esac
}

emulated_hostfile() {  # emulated_hostfile N
  for i in $(seq "$1"); do echo "$net.$((10 + i)) slots=1"; done
}

# emulated_mpirun_args: what mpirun needs to start ranks on the emulated hosts (run it in the
# head namespace: nsenter --net=/run/netns/$PITRAIN_CLUSTER-hhead mpirun ...).
emulated_mpirun_args() {
  echo "--mca plm_rsh_agent $root/bench/netns_rsh.sh --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self" \
    "--mca btl_tcp_if_include $subnet/24 --mca oob_tcp_if_include $subnet/24 -x PITRAIN_CLUSTER"
}

# mpirun's arguments for one rank a host and one thread a rank (OpenBLAS' idle workers would
# otherwise spin inside a host's CPU quota); idle ranks yield, as hosts may share cores.
one_rank_a_host=(--map-by node --bind-to none --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)

# emulated_mpirun SECONDS MPIRUN_ARGS...: mpirun in the head namespace onto the emulated hosts,
# one rank a host, stopped after SECONDS.
emulated_mpirun() {
  local seconds=$1
  shift
  # shellcheck disable=SC2046
  timeout --foreground "$seconds" nsenter --net="/run/netns/$PITRAIN_CLUSTER-hhead" \
    mpirun "${one_rank_a_host[@]}" $(emulated_mpirun_args) "$@" </dev/null
}

# emulation_available: true, or false after a SKIP line saying what the machine lacks.
emulation_available() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: the emulated cluster needs root (network namespaces, tc, cgroups)"
    return 1
  fi
  local probe=${PITRAIN_CLUSTER}probe
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "SKIP: this machine does not allow network namespaces (ip netns add failed)"
    return 1
  fi
  ip netns del "$probe"
  if [ ! -w /sys/fs/cgroup/cpu ]; then
    echo "SKIP: no writable cgroup-v1 cpu controller at /sys/fs/cgroup/cpu"
    return 1
  fi
}
