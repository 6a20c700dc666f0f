// The memory bound: what a flag or a file's header asks a rank to allocate is compared with the
// machine's physical memory before it is allocated (a Raspberry Pi has 1-8 GB).
#pragma once
#include <cstdint>
#include <string>

namespace pitrain {

uint64_t physical_memory_bytes();  // sysconf: pages x page size, or less under `ulimit -v`

// UsageError "WHAT needs X GB a rank, more than this machine's Y GB of memory; FIX" when `bytes`
// (a double: products of hostile sizes must not wrap) is more than the physical memory.
void check_fits_memory(const std::string& what, double bytes, const std::string& fix);

}  // namespace pitrain
