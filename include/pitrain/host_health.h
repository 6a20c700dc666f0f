#pragma once
// What the kernel says of this host's power and heat. A Pi short of power or too hot runs its
// cores slower, and its rank becomes a straggler that every other rank waits for: training
// warns, once, on the rank that sees it.
#include <cstdint>
#include <ostream>
#include <string>

namespace pitrain {

class HostHealth {
 public:
  // `sys`: sysfs' root (a test gives a folder of its own). Reads the since-boot flags now, so
  // that only what happens from here on counts.
  explicit HostHealth(std::string sys = "/sys");
  // What is wrong now, or happened since the start ("under-voltage now (get_throttled 0x50005)",
  // "CPU at 82 C"); "" when nothing is, or the kernel exposes nothing.
  std::string problem() const;
  // The first problem() of a run, to `err` with this rank and host; later ones say nothing.
  void warn_once(std::ostream& err, int rank);

 private:
  std::string sys_;
  uint32_t throttled_at_start_ = 0;
  bool warned_ = false;
};

}  // namespace pitrain
