#include "pitrain/host_health.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

namespace pitrain {

namespace {

// The Raspberry Pi firmware's flags (vcgencmd get_throttled): bits 0-3 now, 16-19 since boot.
constexpr uint32_t kUnderVoltage = 1u << 0, kCapped = 1u << 1, kThrottled = 1u << 2,
                   kSoftTempLimit = 1u << 3, kNowBits = 0xf, kSinceBootShift = 16;
// A Pi 4 starts to throttle at 80 C (a Pi 3 B+ caps its clock from 60 C on).
constexpr int kHotMilliCelsius = 80000;

std::optional<std::string> first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// The number a sysfs file holds, in `base`; nothing where the file is missing or holds none.
std::optional<long> read_number(const std::filesystem::path& file, int base) {
  const auto text = first_line(file);
  if (!text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text->c_str(), &end, base);
  if (end == text->c_str() || errno) return std::nullopt;
  return value;
}

// The firmware's flags (hexadecimal), where the Pi kernel exposes them.
std::optional<long> read_throttled(const std::string& sys) {
  return read_number(sys + "/devices/platform/soc/soc:firmware/get_throttled", 16);
}

std::string flag_names(uint32_t bits) {
  std::string names;
  for (auto [bit, name] : {std::pair{kUnderVoltage, "under-voltage"},
                           {kCapped, "clock capped"},
                           {kThrottled, "throttled"},
                           {kSoftTempLimit, "soft temperature limit"}})
    if (bits & bit) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

// The upstream kernel's under-voltage alarm (hwmon "rpi_volt"), where get_throttled is missing.
bool rpi_volt_alarm(const std::string& sys) {
  std::error_code ec;
  for (const auto& hwmon : std::filesystem::directory_iterator(sys + "/class/hwmon", ec))
    if (first_line(hwmon.path() / "name") == "rpi_volt" &&
        first_line(hwmon.path() / "in0_lcrit_alarm") == "1")
      return true;
  return false;
}

}  // namespace

HostHealth::HostHealth(std::string sys) : sys_(std::move(sys)) {
  throttled_at_start_ = uint32_t(read_throttled(sys_).value_or(0)) >> kSinceBootShift;
}

std::string HostHealth::problem() const {
  if (const auto read = read_throttled(sys_)) {
    const auto flags = uint32_t(*read);
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", flags);
    const std::string source = " (get_throttled " + std::string(hex) + ")";
    if (flags & kNowBits) return flag_names(flags & kNowBits) + " now" + source;
    if (const uint32_t since = (flags >> kSinceBootShift) & ~throttled_at_start_ & kNowBits)
      return flag_names(since) + " during this run" + source;
  } else if (rpi_volt_alarm(sys_)) {
    return "under-voltage now (rpi_volt alarm)";
  }
  const auto milli_celsius = read_number(sys_ + "/class/thermal/thermal_zone0/temp", 10);
  if (milli_celsius && *milli_celsius >= kHotMilliCelsius)
    return "CPU at " + std::to_string(*milli_celsius / 1000) + " C";
  return "";
}

void HostHealth::warn_once(std::ostream& err, int rank) {
  if (warned_) return;
  const std::string what = problem();
  if (what.empty()) return;
  warned_ = true;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  err << "pitrain: warning: rank " << rank << " on " << host << ": " << what
      << ": its cores run slower and every rank waits for it; check its power supply and "
         "cooling (README, troubleshooting)\n"
      << std::flush;
}

}  // namespace pitrain
