// int8 on the wire: a quarter of fp32's bytes. Values travel in blocks of kBlock, each an int8
// per value and one float scale (max |v| / 127), so a block of small gradients keeps its
// precision next to a block of large ones. The reduction widens both blocks, adds, and picks a
// new scale for the sum; with error feedback, what a rank's rounding dropped is added to its
// next values.
#include <algorithm>
#include <cmath>

#include "pitrain/wire.h"

namespace pitrain {
namespace {

constexpr int kBlock = 256;

struct Block8 {
  float scale;
  int8_t q[kBlock];
};

// values[0, count) -> block, rounded to nearest; the rest of the block is zero.
void quantize(const float* values, int count, Block8& block) {
  float top = 0;
  for (int i = 0; i < count; ++i) top = std::max(top, std::abs(values[i]));
  block.scale = top > 0 ? top / 127.0f : 1.0f;
  const float inv = 1.0f / block.scale;
  for (int i = 0; i < kBlock; ++i) block.q[i] = i < count ? int8_t(std::lrint(values[i] * inv)) : 0;
}

// MPI reduction of int8 blocks: widen, add, quantise again.
void sum_blocks(void* in, void* inout, int* len, MPI_Datatype*) {
  const Block8* a = static_cast<const Block8*>(in);
  Block8* b = static_cast<Block8*>(inout);
  float sum[kBlock];
  for (int k = 0; k < *len; ++k) {
    for (int i = 0; i < kBlock; ++i) sum[i] = a[k].q[i] * a[k].scale + b[k].q[i] * b[k].scale;
    quantize(sum, kBlock, b[k]);
  }
}

class Average8 : public WireAverage {
 public:
  Average8(Comm& comm, int64_t n, const WireOptions& opts)
      : WireAverage(comm, n), out_(size_t(2 * (n / kBlock + 1))), in_(out_.size()) {
    if (opts.error_feedback) residual_.assign(size_t(n), 0.0f);
    MPI_Type_contiguous(int(sizeof(Block8)), MPI_BYTE, &block_type_);
    MPI_Type_commit(&block_type_);
    MPI_Op_create(&sum_blocks, 1, &sum_op_);
  }
  ~Average8() override {
    MPI_Op_free(&sum_op_);
    MPI_Type_free(&block_type_);
  }

 private:
  // A range takes the next free blocks (each range has at most one partial block, so twice
  // n / kBlock blocks are enough for any bucketing).
  MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) override {
    const int64_t first = next_block_;
    float want[kBlock];
    for (int64_t start = lo; start < hi; start += kBlock, ++next_block_) {
      const int count = int(std::min<int64_t>(kBlock, hi - start));
      for (int i = 0; i < count; ++i)
        want[i] = values[start + i] * scale + (residual_.empty() ? 0.0f : residual_[size_t(start + i)]);
      Block8& block = out_[size_t(next_block_)];
      quantize(want, count, block);
      if (!residual_.empty())
        for (int i = 0; i < count; ++i) residual_[size_t(start + i)] = want[i] - block.q[i] * block.scale;
    }
    ranges_.push_back({lo, hi, first});
    MPI_Request req;
    comm_.start_allreduce(&out_[size_t(first)], &in_[size_t(first)], int(next_block_ - first), block_type_, sum_op_,
                          &req);
    return req;
  }

  void receive() override {
    for (const Range& r : ranges_)
      for (int64_t i = r.lo; i < r.hi; ++i) {
        const Block8& block = in_[size_t(r.first_block + (i - r.lo) / kBlock)];
        averages_[size_t(i)] = block.q[(i - r.lo) % kBlock] * block.scale;
      }
    ranges_.clear();
    next_block_ = 0;
  }

  struct Range {
    int64_t lo, hi, first_block;
  };
  std::vector<Block8> out_, in_;  // what this rank sends; the sums
  std::vector<Range> ranges_;     // started since the last finish
  int64_t next_block_ = 0;
  MPI_Datatype block_type_ = MPI_DATATYPE_NULL;
  MPI_Op sum_op_ = MPI_OP_NULL;
};

}  // namespace

std::unique_ptr<WireAverage> make_int8_average(Comm& comm, int64_t n, const WireOptions& opts) {
  return std::make_unique<Average8>(comm, n, opts);
}

int64_t int8_wire_bytes(int64_t n) { return (n + kBlock - 1) / kBlock * int64_t(sizeof(Block8)); }

}  // namespace pitrain
