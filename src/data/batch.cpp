#include <algorithm>
#include <numeric>

#include "pitrain/dataset.h"
#include "pitrain/image_files.h"
#include "pitrain/rng.h"

namespace pitrain {

void make_batch(const Split& split, const int64_t* idx, int n, float* x, int32_t* y) {
  constexpr float scale = 1.0f / 255.0f;
  for (int i = 0; i < n; ++i) {
    const uint8_t* src = &split.images[size_t(idx[i]) * kImagePixels];
    float* dst = x + int64_t(i) * kImagePixels;
    for (int p = 0; p < kImagePixels; ++p) dst[p] = float(src[p]) * scale;
    y[i] = split.labels[size_t(idx[i])];
  }
}

std::vector<int64_t> epoch_order(int64_t rows, int64_t count, uint64_t seed, int rank, int64_t epoch) {
  std::vector<int64_t> order, perm(static_cast<size_t>(rows));
  order.reserve(size_t(count));
  for (uint64_t round = 0; int64_t(order.size()) < count; ++round) {
    std::iota(perm.begin(), perm.end(), 0);
    shuffle_with_key(perm, rng_key(seed, uint64_t(rank), uint64_t(epoch), round));
    const int64_t take = std::min<int64_t>(rows, count - int64_t(order.size()));
    order.insert(order.end(), perm.begin(), perm.begin() + take);
  }
  return order;
}

}  // namespace pitrain
