// The pitrain dataset file (HDF5): /train/images (N,H,W) or (N,H,W,C) uint8, /train/labels (N,)
// integer, /val/images, /val/labels; root attributes class_names (label order) and provenance.
// The images' shape is the dataset's: Quick Draw's are (N,28,28).
#pragma once
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pitrain/image_files.h"
#include "pitrain/shape.h"

namespace pitrain {

namespace h5 {
class File;
}

struct Split {
  std::vector<uint8_t> images;  // (N, H, W, C)
  std::vector<int32_t> labels;  // (N,)
  Shape shape = kDrawingShape;  // of an image
  int64_t size() const { return int64_t(labels.size()); }
};

// The rows [first, last) that rank `rank` of `size` owns out of n: contiguous, sizes differ by
// at most one, and together they cover every row exactly once.
std::pair<int64_t, int64_t> slice_bounds(int64_t n, int rank, int size);

// A rank's rows of a split: all in memory (`data`), or streamed from the file a window of
// `window_blocks` blocks of `block_rows` rows at a time (SliceStream), where they would take more
// memory than the rank may hold.
struct RankSlice {
  Split data;                 // in memory: every row of the slice; streamed: its shape alone
  std::string path;           // the file
  std::string split;          // "train" or "val"
  int64_t first_row = 0;      // of the split in the file
  int64_t rows = 0;           // of this slice
  int64_t total_rows = 0;     // of the whole split
  int64_t block_rows = 0;     // streamed: rows a block read at once (whole chunks); 0: in memory
  int64_t window_blocks = 0;  // streamed: blocks a window
  std::vector<std::string> class_names;
  bool streamed() const { return block_rows > 0; }
};

// Bytes a row takes in memory (its pixels, its label, its place in an order).
inline int64_t row_bytes(const Shape& image) { return image.size() + 2 * int64_t(sizeof(int32_t)); }
// What a rank may hold of its data by default (--data-memory): a small set stays in memory.
constexpr int64_t kDefaultDataMemory = int64_t(128) << 20;

// What is wrong with a list of class names, or "" when nothing is: fewer than two or over
// kMaxClasses, one empty, over kMaxClassNameBytes, not UTF-8 or holding a control character
// (printed, it could drive the terminal), one named twice. A dataset file, a checkpoint and
// prepare's --classes all need a usable list.
constexpr int kMaxClasses = 1 << 16, kMaxClassNameBytes = 256;
std::string class_names_problem(const std::vector<std::string>& names);

// This rank's rows of `split` ("train" or "val"), with shapes, dtypes and the label range checked
// against class_names. Read at once with an HDF5 hyperslab where they take at most
// `memory_bytes`; else streamed in two windows that fit it (the file is read again every epoch).
RankSlice load_rank_slice(const std::string& path, const std::string& split, int rank, int size,
                          int64_t memory_bytes = kDefaultDataMemory);

// For the banner: "in memory (33 MB)", or "streamed in windows of 4096 rows (...)".
std::string slice_text(const RankSlice& slice);

// The slice's first n rows (at most all), in memory whether or not the slice is streamed.
Split first_rows(const RankSlice& slice, int64_t n);

// A streamed slice's rows in an epoch's order: see src/data/stream.cpp.
class SliceStream {
 public:
  explicit SliceStream(const RankSlice& slice);
  ~SliceStream();  // waits for a window read in the background
  SliceStream(const SliceStream&) = delete;
  SliceStream& operator=(const SliceStream&) = delete;
  // Plans positions [first, count) of passes over every row: shuffled (the blocks in a seeded
  // order, the rows in each window in a seeded order), or in the file's order.
  void start(bool shuffled, uint64_t seed, int rank, int64_t epoch, int64_t count, int64_t first);
  // The next row's pixels (H x W x C), valid until the next call; its label in *label.
  const uint8_t* next_row(int32_t* label);

 private:
  struct Window;
  int64_t windows_a_pass() const;
  std::vector<int64_t> window_blocks(int64_t pass, int64_t index) const;
  int64_t block_size(int64_t block) const;
  int64_t window_size(int64_t pass, int64_t index) const;
  void read_window(int64_t pass, int64_t index, Window& w) const;
  void prefetch_after(int64_t pass, int64_t index);
  const RankSlice& slice_;
  std::unique_ptr<h5::File> file_;
  int64_t blocks_;
  bool shuffled_ = false;
  uint64_t epoch_key_ = 0;  // of the seed, the rank and the epoch
  int64_t left_ = 0;        // rows still to give
  int64_t offset_ = 0;      // in current_'s order
  std::unique_ptr<Window> current_, next_;
  std::future<void> pending_;  // next_'s read
};

class Comm;
// Every rank reads its own host's copy of the dataset: one that differs from rank 0's in its
// rows or classes (a stale copy on one Pi) would take another number of steps or another model,
// and the ranks would wait in mismatched collectives. Collective: all ranks fail together,
// naming the first rank whose copy differs.
void check_same_dataset(Comm& comm, const std::string& path, const std::string& split,
                        const RankSlice& slice);

struct Batch {
  const float* x;    // (n, H, W, C) in [0, 1]
  const int32_t* y;  // (n,)
  int n;
};

// Batches of a split, as llm.c's dataloader: reset for a pass, then next() until has_next() is
// false. Holds one batch's buffers; the split must outlive it.
class BatchLoader {
 public:
  BatchLoader(const Split& split, int batch_size);
  BatchLoader(const RankSlice& slice, int batch_size);  // in memory or streamed, as it was loaded
  // A training epoch on one rank: `steps` full batches drawn from as many seeded permutations of
  // the split as needed (a pure function of seed, rank and epoch), starting at batch `first`.
  void reset_shuffled(uint64_t seed, int rank, int64_t epoch, int64_t steps, int64_t first);
  void reset_in_order();  // every row once, in order; the last batch may be short
  bool has_next() const { return pos_ < count_; }
  Batch next();

 private:
  const Split& split_;
  int batch_size_;
  int64_t rows_;                         // of the split or slice
  std::unique_ptr<SliceStream> stream_;  // a streamed slice's; in memory: none
  std::vector<int64_t> order_;           // in memory: rows of the pass
  size_t pos_ = 0, count_ = 0;           // rows given, and to give, in the pass
  std::vector<float> x_;                 // (batch_size, H, W, C)
  std::vector<int32_t> y_;
};

// An images dataset's dimensions: (n, H, W) for one channel, as Quick Draw's, else (n, H, W, C).
std::vector<unsigned long long> image_dims(int64_t n, const Shape& image);

// Rows a chunk of the datasets pitrain writes: a streamed slice reads whole chunks.
constexpr int64_t kDatasetChunkRows = 4096;

void write_dataset(const std::string& path, const Split& train, const Split& val,
                   const std::vector<std::string>& class_names,
                   const std::map<std::string, std::string>& provenance);
// The root attributes: class_names, and provenance's (source, seed, ...).
void write_attributes(h5::File& f, const std::vector<std::string>& class_names,
                      const std::map<std::string, std::string>& provenance);

}  // namespace pitrain
