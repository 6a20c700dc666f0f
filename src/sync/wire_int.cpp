// int8 and int4 on the wire: about a quarter and a seventh of fp32's bytes. Values travel in
// blocks, each an integer per value and one float scale (max |v| / the largest integer), so a
// block of small values keeps its precision next to a block of large ones. The reduction widens
// both blocks, adds, and picks a new scale for the sum; with error feedback, what a rank's
// rounding dropped is added to its next values (what the reduction's own rounding drops is not:
// int4's blocks are 64 values, not 256, to keep that small).
#include <algorithm>
#include <cmath>

#include "pitrain/wire.h"

namespace pitrain {
namespace {

template <int Bits, int Values>
struct Block {
  static constexpr int kValues = Values, kTop = (1 << (Bits - 1)) - 1;  // 127 or 7
  float scale;
  uint8_t bits[Values * Bits / 8];  // int4: value 2i in the low nibble of byte i, 2i + 1 in the high

  int get(int i) const {
    if constexpr (Bits == 8) {
      return int8_t(bits[i]);
    } else {
      const uint8_t b = bits[i / 2];
      return i % 2 ? int8_t(b) >> 4 : int8_t(uint8_t(b << 4)) >> 4;  // arithmetic shifts keep the sign
    }
  }
  void set(int i, int v) {
    if constexpr (Bits == 8) {
      bits[i] = uint8_t(int8_t(v));
    } else {
      uint8_t& b = bits[i / 2];
      b = i % 2 ? uint8_t((b & 0x0f) | ((v & 0x0f) << 4)) : uint8_t((b & 0xf0) | (v & 0x0f));
    }
  }
};
using Block8 = Block<8, 256>;
using Block4 = Block<4, 64>;

// values[0, count) -> block, rounded to nearest; the rest of the block is zero.
template <class B>
void quantize(const float* values, int count, B& block) {
  float top = 0;
  for (int i = 0; i < count; ++i) top = std::max(top, std::abs(values[i]));
  block.scale = top > 0 ? top / B::kTop : 1.0f;
  const float inv = 1.0f / block.scale;
  for (int i = 0; i < B::kValues; ++i) block.set(i, i < count ? int(std::lrint(values[i] * inv)) : 0);
}

// MPI reduction of blocks: widen, add, quantise again.
template <class B>
void sum_blocks(void* in, void* inout, int* len, MPI_Datatype*) {
  const B* a = static_cast<const B*>(in);
  B* b = static_cast<B*>(inout);
  float sum[B::kValues];
  for (int k = 0; k < *len; ++k) {
    for (int i = 0; i < B::kValues; ++i) sum[i] = a[k].get(i) * a[k].scale + b[k].get(i) * b[k].scale;
    quantize(sum, B::kValues, b[k]);
  }
}

template <class B>
class AverageBlocks : public WireAverage {
 public:
  AverageBlocks(Comm& comm, int64_t n, const WireOptions& opts)
      : WireAverage(comm, n), out_(size_t(2 * (n / B::kValues + 1))), in_(out_.size()) {
    static_assert(sizeof(B) == sizeof(float) + sizeof(B::bits), "no padding bytes go over the wire");
    if (opts.error_feedback) residual_.assign(size_t(n), 0.0f);
    MPI_Type_contiguous(int(sizeof(B)), MPI_BYTE, &block_type_);
    MPI_Type_commit(&block_type_);
    MPI_Op_create(&sum_blocks<B>, 1, &sum_op_);
  }
  ~AverageBlocks() override {
    MPI_Op_free(&sum_op_);
    MPI_Type_free(&block_type_);
  }

 private:
  // A range takes the next free blocks (each range has at most one partial block, so twice
  // n / kValues blocks are enough for any bucketing).
  MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) override {
    const int64_t first = next_block_;
    float want[B::kValues];
    for (int64_t start = lo; start < hi; start += B::kValues, ++next_block_) {
      const int count = int(std::min<int64_t>(B::kValues, hi - start));
      for (int i = 0; i < count; ++i)
        want[i] = values[start + i] * scale + (residual_.empty() ? 0.0f : residual_[size_t(start + i)]);
      B& block = out_[size_t(next_block_)];
      quantize(want, count, block);
      if (!residual_.empty())
        for (int i = 0; i < count; ++i) residual_[size_t(start + i)] = want[i] - block.get(i) * block.scale;
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
        const B& block = in_[size_t(r.first_block + (i - r.lo) / B::kValues)];
        averages_[size_t(i)] = block.get(int((i - r.lo) % B::kValues)) * block.scale;
      }
    ranges_.clear();
    next_block_ = 0;
  }

  struct Range {
    int64_t lo, hi, first_block;
  };
  std::vector<B> out_, in_;     // what this rank sends; the sums
  std::vector<Range> ranges_;  // started since the last finish
  int64_t next_block_ = 0;
  MPI_Datatype block_type_ = MPI_DATATYPE_NULL;
  MPI_Op sum_op_ = MPI_OP_NULL;
};

template <class B>
int64_t blocks_wire_bytes(int64_t n) {
  return (n + B::kValues - 1) / B::kValues * int64_t(sizeof(B));
}

}  // namespace

std::unique_ptr<WireAverage> make_int8_average(Comm& comm, int64_t n, const WireOptions& opts) {
  return std::make_unique<AverageBlocks<Block8>>(comm, n, opts);
}

std::unique_ptr<WireAverage> make_int4_average(Comm& comm, int64_t n, const WireOptions& opts) {
  return std::make_unique<AverageBlocks<Block4>>(comm, n, opts);
}

int64_t int8_wire_bytes(int64_t n) { return blocks_wire_bytes<Block8>(n); }
int64_t int4_wire_bytes(int64_t n) { return blocks_wire_bytes<Block4>(n); }

}  // namespace pitrain
