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

// Reads only this rank's rows of `split` ("train" or "val") with an HDF5 hyperslab, and checks
// shapes, dtypes and the label range against class_names.
RankSlice load_rank_slice(const std::string& path, const std::string& split, int rank, int size);

// Batching. x gets (n, 28, 28, 1) floats in [0, 1], y the labels, of the rows idx[0..n).
void make_batch(const Split& split, const int64_t* idx, int n, float* x, int32_t* y);

// One epoch's sample order on one rank: `count` indices into its slice of `rows`, taken from as
// many seeded permutations as needed; a pure function of (seed, rank, epoch).
std::vector<int64_t> epoch_order(int64_t rows, int64_t count, uint64_t seed, int rank, int64_t epoch);

void write_dataset(const std::string& path, const Split& train, const Split& val,
                   const std::vector<std::string>& class_names,
                   const std::map<std::string, std::string>& provenance);

}  // namespace pitrain
