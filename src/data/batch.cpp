#include <algorithm>
#include <numeric>

#include "pitrain/dataset.h"
#include "pitrain/image_files.h"
#include "pitrain/rng.h"

namespace pitrain {

BatchLoader::BatchLoader(const Split& split, int batch_size)
    : split_(split),
      batch_size_(batch_size),
      rows_(split.size()),
      x_(size_t(batch_size * split.shape.size())),
      y_(size_t(batch_size)) {}

BatchLoader::BatchLoader(const RankSlice& slice, int batch_size)
    : BatchLoader(slice.data, batch_size) {
  if (!slice.streamed()) return;
  stream_ = std::make_unique<SliceStream>(slice);
  rows_ = slice.rows;
}

void BatchLoader::reset_shuffled(uint64_t seed, int rank, int64_t epoch, int64_t steps,
                                 int64_t first) {
  const int64_t count = steps * batch_size_;
  count_ = size_t(count);
  pos_ = size_t(std::min(first, steps) * batch_size_);
  if (stream_) return stream_->start(true, seed, rank, epoch, count, int64_t(pos_));
  std::vector<int64_t> perm(static_cast<size_t>(rows_));
  order_.clear();
  order_.reserve(size_t(count));
  for (uint64_t round = 0; int64_t(order_.size()) < count; ++round) {
    std::iota(perm.begin(), perm.end(), 0);
    shuffle_with_key(perm, rng_key(seed, uint64_t(rank), uint64_t(epoch), round));
    const int64_t take = std::min<int64_t>(rows_, count - int64_t(order_.size()));
    order_.insert(order_.end(), perm.begin(), perm.begin() + take);
  }
}

void BatchLoader::reset_in_order() {
  count_ = size_t(rows_), pos_ = 0;
  if (stream_) return stream_->start(false, 0, 0, 0, rows_, 0);
  order_.resize(count_);
  std::iota(order_.begin(), order_.end(), 0);
}

Batch BatchLoader::next() {
  constexpr float scale = 1.0f / 255.0f;
  const int n = int(std::min<size_t>(size_t(batch_size_), count_ - pos_));
  const int64_t pixels = split_.shape.size();
  for (int i = 0; i < n; ++i) {
    const uint8_t* src;
    if (stream_) {
      src = stream_->next_row(&y_[size_t(i)]);
    } else {
      const size_t row = size_t(order_[pos_ + size_t(i)]);
      src = &split_.images[row * size_t(pixels)];
      y_[size_t(i)] = split_.labels[row];
    }
    float* dst = x_.data() + i * pixels;
    for (int64_t p = 0; p < pixels; ++p) dst[p] = float(src[p]) * scale;
  }
  pos_ += size_t(n);
  // In memory, the next batch's rows, drawn at random from a split larger than the caches, start
  // on their way while this batch's step computes: its copy then waits for memory far less.
  const size_t ahead = stream_ ? pos_ : std::min(count_, pos_ + size_t(batch_size_));
  for (size_t i = pos_; i < ahead; ++i)
    for (int64_t p = 0; p < pixels; p += 64)
      __builtin_prefetch(&split_.images[size_t(order_[i] * pixels + p)]);
  return {x_.data(), y_.data(), n};
}

}  // namespace pitrain
