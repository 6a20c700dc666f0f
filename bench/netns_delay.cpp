// The emulated hosts' latency (bench/netns_cluster.sh): this kernel has no netem, so a host's
// stack talks to a tap device that this program serves, and it passes every frame between the
// tap and the host's veth into the switch, the frames the host sends MICROS later, in order.
// A frame from one host to another is thus MICROS late, as over a WLAN (1-5 ms a message).
// usage: netns_delay TAP VETH MICROS   (inside the host's network namespace, until killed)
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "netns_delay: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

// A frame that cannot be written is lost, as on a link: the tap is down until the script has
// set it up, and a full queue drops. TCP sends it again.
void dropped(const char* where) {
  if (errno != EIO && errno != EAGAIN && errno != ENOBUFS) fail(std::string(where) + " write");
}

int64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

int open_tap(const char* name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) fail("/dev/net/tun");
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) fail(std::string("tap ") + name);
  return fd;
}

// A raw socket on the veth: every frame the switch sends it, and frames written go out on it.
// Frames pass between it and the tap with the kernel's offload header (virtio_net_hdr) in
// front: a frame from a veth may still lack its TCP checksum, or be one 64 KB segment that
// the receiving stack cuts up, and the header tells the tap so.
int open_veth(const char* name) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) fail("packet socket");
  const int ifindex = int(if_nametoindex(name));
  if (ifindex == 0) fail(std::string("veth ") + name);
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET, addr.sll_protocol = htons(ETH_P_ALL), addr.sll_ifindex = ifindex;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0)
    fail(std::string("bind ") + name);
  const int on = 1;
  setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &on, sizeof on);  // not the frames sent on it
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &on, sizeof on) < 0) fail("PACKET_VNET_HDR");
  return fd;
}

struct Frame {
  int64_t due_ns;
  std::vector<char> bytes;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: netns_delay TAP VETH MICROS\n");
    return 2;
  }
  const int64_t delay_ns = int64_t(std::atol(argv[3])) * 1000;
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake within a microsecond of a frame's time, not 50
  const int tap = open_tap(argv[1]);
  const int veth = open_veth(argv[2]);
  std::deque<Frame> sent;          // by the host, not yet due: the delay is fixed, so due in order
  std::vector<char> buf(1 << 17);  // a header and a 64 KB segment
  pollfd fds[2] = {{tap, POLLIN, 0}, {veth, POLLIN, 0}};
  while (true) {
    const int64_t t = now_ns();
    while (!sent.empty() && sent.front().due_ns <= t) {
      if (write(veth, sent.front().bytes.data(), sent.front().bytes.size()) < 0) dropped("veth");
      sent.pop_front();
    }
    timespec wait{};
    const timespec* timeout = nullptr;
    if (!sent.empty()) {
      const int64_t left = sent.front().due_ns - t;
      wait.tv_sec = time_t(left / 1000000000), wait.tv_nsec = long(left % 1000000000);
      timeout = &wait;
    }
    if (ppoll(fds, 2, timeout, nullptr) < 0 && errno != EINTR) fail("ppoll");
    for (ssize_t n; (n = read(tap, buf.data(), buf.size())) > 0;)
      sent.push_back({now_ns() + delay_ns, std::vector<char>(buf.begin(), buf.begin() + n)});
    for (ssize_t n; (n = recv(veth, buf.data(), buf.size(), 0)) > 0;)
      if (write(tap, buf.data(), size_t(n)) < 0) dropped("tap");
  }
}
