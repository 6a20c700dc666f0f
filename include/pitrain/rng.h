// Counter-based randomness: every random draw is a pure function of (seed, stream, index), so a
// run needs no RNG state to resume exactly, and it is the same on 32- and 64-bit machines.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

namespace pitrain {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One 64-bit key from a seed and up to three stream coordinates (rank, epoch, layer...).
inline uint64_t rng_key(uint64_t seed, uint64_t a = 0, uint64_t b = 0, uint64_t c = 0) {
  return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b) ^ c);
}

// Uniform float in [0, 1) from a key and an index.
inline float uniform01(uint64_t key, uint64_t i) {
  return static_cast<float>(splitmix64(key + i) >> 40) * (1.0f / 16777216.0f);
}

// Fisher-Yates shuffle driven by splitmix64 (std::shuffle differs between standard libraries).
template <class T>
void shuffle_with_key(std::vector<T>& v, uint64_t key) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(splitmix64(key + i) % i);
    std::swap(v[i - 1], v[j]);
  }
}

// A digest of bytes: whether ranks hold the same values, found without sending them.
inline uint64_t hash_bytes(const void* data, size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = n;
  for (size_t i = 0; i < n; i += 4) {
    uint32_t word = 0;
    std::memcpy(&word, bytes + i, n - i < 4 ? n - i : 4);
    h = splitmix64(h ^ word);
  }
  return h;
}

}  // namespace pitrain
