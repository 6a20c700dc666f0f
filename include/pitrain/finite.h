// Whether floats are finite, in loops that vectorise: the optimizer's check of each gradient
// and the wire formats' check of each block.
#pragma once
#include <cstdint>
#include <cstring>

namespace pitrain {

// Bit 31 is set when x is NaN or Inf: its exponent bits are all ones, and adding one to the
// exponent carries out of it. An OR of these over a loop vectorises, where a search that stops at
// the first bad value would not.
inline uint32_t non_finite_bit(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x7f800000u) + 0x00800000u;
}
constexpr uint32_t kNonFinite = 0x80000000u;

inline bool all_finite(const float* x, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= non_finite_bit(x[i]);
  return !(bad & kNonFinite);
}

}  // namespace pitrain
