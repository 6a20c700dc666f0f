# Sourced by the emulation scripts in bench/: one link direction of an emulated host.
# shape_egress NS DEV MBIT: tc tbf at MBIT on DEV's egress in namespace NS, with a burst of 1 ms
# of traffic but at least two frames, as verified in ../shared/DESIGN.md.
shape_egress() {
  local burst=$(($3 * 125))
  [ "$burst" -ge 3028 ] || burst=3028
  tc -n "$1" qdisc add dev "$2" root tbf rate "${3}mbit" burst "$burst" latency 100ms
}
# use_reno NS: TCP reno inside NS (bbr is the default there, and cubic cannot be chosen).
use_reno() { ip netns exec "$1" sysctl -qw net.ipv4.tcp_congestion_control=reno; }
