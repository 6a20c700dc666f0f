// A streamed slice's rows, a window of blocks at a time: the next window is read in the
// background while the current one trains. Shuffled, an epoch takes the blocks in a seeded order
// and the rows of each window in a seeded order (as tf.data's shuffle buffer, but a pure function
// of seed, rank, epoch and position, so that a resume mid-epoch reads on exactly where the
// stopped run was).
#include <algorithm>
#include <numeric>

#include "pitrain/dataset.h"
#include "pitrain/h5.h"
#include "pitrain/image_files.h"
#include "pitrain/rng.h"

namespace pitrain {
namespace {

constexpr uint64_t kBlocks = 0xb1, kRows = 0x5e;  // the two orders' key coordinates

}  // namespace

struct SliceStream::Window {
  std::vector<uint8_t> images;  // (rows, H, W, C)
  std::vector<int32_t> labels;  // (rows)
  std::vector<int32_t> order;   // (rows) the window's rows in the order they are given
  int64_t pass = -1, index = -1;
};

SliceStream::SliceStream(const RankSlice& slice)
    : slice_(slice),
      file_(std::make_unique<h5::File>(h5::File::open_read(slice.path))),
      blocks_((slice.rows + slice.block_rows - 1) / slice.block_rows),
      current_(std::make_unique<Window>()),
      next_(std::make_unique<Window>()) {}

SliceStream::~SliceStream() {
  if (pending_.valid()) pending_.wait();
}

int64_t SliceStream::windows_a_pass() const {
  return (blocks_ + slice_.window_blocks - 1) / slice_.window_blocks;
}

std::vector<int64_t> SliceStream::window_blocks(int64_t pass, int64_t index) const {
  std::vector<int64_t> order(static_cast<size_t>(blocks_));
  std::iota(order.begin(), order.end(), 0);
  if (shuffled_) shuffle_with_key(order, rng_key(epoch_key_, uint64_t(pass), kBlocks));
  const int64_t first = index * slice_.window_blocks;
  const int64_t last = std::min(blocks_, first + slice_.window_blocks);
  return {order.begin() + first, order.begin() + last};
}

int64_t SliceStream::block_size(int64_t block) const {
  return std::min(slice_.block_rows, slice_.rows - block * slice_.block_rows);
}

int64_t SliceStream::window_size(int64_t pass, int64_t index) const {
  int64_t rows = 0;
  for (int64_t b : window_blocks(pass, index)) rows += block_size(b);
  return rows;
}

void SliceStream::read_window(int64_t pass, int64_t index, Window& w) const {
  const int64_t rows = window_size(pass, index);
  const int64_t pixels = slice_.data.shape.size();
  w.images.resize(size_t(rows * pixels));
  w.labels.resize(size_t(rows));
  int64_t at = 0;
  for (int64_t b : window_blocks(pass, index)) {
    const hsize_t first = hsize_t(slice_.first_row + b * slice_.block_rows);
    const hsize_t n = hsize_t(block_size(b));
    const std::string group = "/" + slice_.split;
    file_->read_rows_into(group + "/images", first, n, &w.images[size_t(at * pixels)]);
    file_->read_rows_into(group + "/labels", first, n, &w.labels[size_t(at)]);
    at += int64_t(n);
  }
  w.order.resize(size_t(rows));
  std::iota(w.order.begin(), w.order.end(), 0);
  if (shuffled_)
    shuffle_with_key(w.order, rng_key(epoch_key_, uint64_t(pass), kRows, uint64_t(index)));
  w.pass = pass, w.index = index;
}

// The window after (pass, index), read in the background into next_.
void SliceStream::prefetch_after(int64_t pass, int64_t index) {
  if (++index == windows_a_pass()) ++pass, index = 0;
  pending_ =
      std::async(std::launch::async, [this, pass, index] { read_window(pass, index, *next_); });
}

void SliceStream::start(bool shuffled, uint64_t seed, int rank, int64_t epoch, int64_t count,
                        int64_t first) {
  if (pending_.valid()) pending_.wait();  // its error, if any, is of a plan no longer wanted
  shuffled_ = shuffled;
  epoch_key_ = rng_key(seed, uint64_t(rank), uint64_t(epoch));
  left_ = count - first;
  if (left_ <= 0) return;
  // Position `first` of passes over every row: its pass, its window and the rows before it there.
  const int64_t pass = first / slice_.rows;
  int64_t offset = first % slice_.rows, index = 0;
  for (int64_t size; offset >= (size = window_size(pass, index)); ++index) offset -= size;
  read_window(pass, index, *current_);
  offset_ = offset;
  if (left_ > int64_t(current_->order.size()) - offset_) prefetch_after(pass, index);
}

const uint8_t* SliceStream::next_row(int32_t* label) {
  if (offset_ == int64_t(current_->order.size())) {
    pending_.get();  // rethrows a failed read
    std::swap(current_, next_);
    offset_ = 0;
    if (left_ > int64_t(current_->order.size())) prefetch_after(current_->pass, current_->index);
  }
  const size_t row = size_t(current_->order[size_t(offset_++)]);
  --left_;
  *label = current_->labels[row];
  return &current_->images[row * size_t(slice_.data.shape.size())];
}

}  // namespace pitrain
