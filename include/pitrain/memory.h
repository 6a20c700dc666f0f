// The memory bound: what a flag or a file's header asks a rank to allocate is compared with the
// machine's physical memory before it is allocated (a Raspberry Pi has 1-8 GB).
#pragma once
#include <cstdint>
#include <string>

#include "pitrain/error.h"

namespace pitrain {

uint64_t physical_memory_bytes();  // sysconf: pages x page size, or less under `ulimit -v`

// UsageError "WHAT needs X GB a rank, more than this machine's Y GB of memory; FIX" when `bytes`
// (a double: products of hostile sizes must not wrap) is more than the physical memory.
void check_fits_memory(const std::string& what, double bytes, const std::string& fix);

// a x b for a size computed from a file's header (a count, a count of bytes), or an Error
// "WHAT: A x B overflows a N-bit count; ..." when it does not fit T: a damaged or hostile file may
// declare any count, and a wrapped product would pass every check after it.
template <class T>
T checked_mul(T a, T b, const std::string& what) {
  T product;
  if (__builtin_mul_overflow(a, b, &product))
    throw Error(what + ": " + std::to_string(a) + " x " + std::to_string(b) + " overflows a " +
                std::to_string(8 * sizeof(T)) +
                "-bit count (a damaged or hostile file); check the file");
  return product;
}

}  // namespace pitrain
