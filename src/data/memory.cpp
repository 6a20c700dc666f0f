#include "pitrain/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "pitrain/error.h"

namespace pitrain {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  uint64_t bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : UINT64_MAX;
  rlimit limit{};  // `ulimit -v`: a process may be allowed less than the machine has
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    bytes = std::min<uint64_t>(bytes, limit.rlim_cur);
  return bytes;
}

void check_fits_memory(const std::string& what, double bytes, const std::string& fix) {
  // A 32-bit process (armhf) cannot hold more than PTRDIFF_MAX (2 GiB) in one array, and a size_t
  // cast of more would wrap, whatever memory the machine has (an 8 GB Pi 4 with a 32-bit OS).
  const double have = double(physical_memory_bytes()), addressable = double(PTRDIFF_MAX);
  if (bytes <= std::min(have, addressable)) return;
  char text[160];
  if (bytes > addressable)
    std::snprintf(text, sizeof text,
                  " needs %.3g GB a rank, more than a %d-bit process can address (%.3g GB); ",
                  bytes / 1e9, int(8 * sizeof(void*)), addressable / 1e9);
  else
    std::snprintf(text, sizeof text,
                  " needs %.3g GB a rank, more than this machine's %.3g GB of memory; ",
                  bytes / 1e9, have / 1e9);
  throw UsageError(what + text + fix);
}

}  // namespace pitrain
