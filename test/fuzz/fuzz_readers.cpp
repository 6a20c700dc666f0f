// libFuzzer target for the .npy and IDX parsers: any input must give images or a pitrain::Error,
// never a crash, a hang or an out-of-bounds access (built with AddressSanitizer by fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pitrain/error.h"
#include "pitrain/image_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    const auto a = pitrain::parse_npy_images("fuzz.npy", bytes);
    if (a.pixels.size() != size_t(a.rows) * pitrain::kImagePixels) __builtin_trap();
  } catch (const pitrain::Error&) {
  }
  try {
    const auto a = pitrain::parse_idx_images("fuzz.idx", bytes);
    if (a.pixels.size() != size_t(a.rows) * pitrain::kImagePixels) __builtin_trap();
  } catch (const pitrain::Error&) {
  }
  try {
    pitrain::parse_idx_labels("fuzz.idx", bytes);
  } catch (const pitrain::Error&) {
  }
  return 0;
}
