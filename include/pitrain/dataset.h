// The pitrain dataset file (HDF5): /train/images (N,28,28) uint8, /train/labels (N,) integer,
// /val/images, /val/labels; root attributes class_names (label order) and provenance.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pitrain {

struct Split {
  std::vector<uint8_t> images;  // (N, 28, 28)
  std::vector<int32_t> labels;  // (N,)
  int64_t size() const { return int64_t(labels.size()); }
};

// The rows [first, last) that rank `rank` of `size` owns out of n: contiguous, sizes differ by
// at most one, and together they cover every row exactly once.
std::pair<int64_t, int64_t> slice_bounds(int64_t n, int rank, int size);

struct RankSlice {
  Split data;
  int64_t first_row = 0;   // of the split in the file
  int64_t total_rows = 0;  // of the whole split
  std::vector<std::string> class_names;
};

// What is wrong with a list of class names (fewer than two, an empty one, one named twice), or ""
// when nothing is: a dataset file, a checkpoint and prepare's --classes all need a usable list.
std::string class_names_problem(const std::vector<std::string>& names);

// Reads only this rank's rows of `split` ("train" or "val") with an HDF5 hyperslab, and checks
// shapes, dtypes and the label range against class_names.
RankSlice load_rank_slice(const std::string& path, const std::string& split, int rank, int size);

class Comm;
// Every rank reads its own host's copy of the dataset: one that differs from rank 0's in its
// rows or classes (a stale copy on one Pi) would take another number of steps or another model,
// and the ranks would wait in mismatched collectives. Collective: all ranks fail together,
// naming the first rank whose copy differs.
void check_same_dataset(Comm& comm, const std::string& path, const std::string& split,
                        const RankSlice& slice);

struct Batch {
  const float* x;    // (n, 28, 28, 1) in [0, 1]
  const int32_t* y;  // (n,)
  int n;
};

// Batches of a split, as llm.c's dataloader: reset for a pass, then next() until has_next() is
// false. Holds one batch's buffers; the split must outlive it.
class BatchLoader {
 public:
  BatchLoader(const Split& split, int batch_size);
  // A training epoch on one rank: `steps` full batches drawn from as many seeded permutations of
  // the split as needed (a pure function of seed, rank and epoch), starting at batch `first`.
  void reset_shuffled(uint64_t seed, int rank, int64_t epoch, int64_t steps, int64_t first);
  void reset_in_order();  // every row once, in order; the last batch may be short
  bool has_next() const { return pos_ < order_.size(); }
  Batch next();

 private:
  const Split& split_;
  int batch_size_;
  std::vector<int64_t> order_;  // rows of the pass
  size_t pos_ = 0;
  std::vector<float> x_;  // (batch_size, 28, 28, 1)
  std::vector<int32_t> y_;
};

void write_dataset(const std::string& path, const Split& train, const Split& val,
                   const std::vector<std::string>& class_names,
                   const std::map<std::string, std::string>& provenance);

}  // namespace pitrain
