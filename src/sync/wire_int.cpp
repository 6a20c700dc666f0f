// int8 and int4 on the wire: about a quarter and a seventh of fp32's bytes. Values travel in
// blocks, each an integer per value and one float scale (max |v| / the largest integer), so a
// block of small values keeps its precision next to a block of large ones. The reduction widens
// both blocks, adds, and picks a new scale for the sum; with error feedback, what a rank's
// rounding dropped is added to its next values (what the reduction's own rounding drops is not:
// int4's blocks are 64 values, not 256, to keep that small). The same int4 sum carries
// PowerSGD's factors (BlockSum).
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
using Block4 = Block<4, kInt4BlockValues>;

// values[0, count) -> block, rounded to nearest; the rest of the block is zero.
template <class B>
void quantize(const float* values, int count, B& block) {
  float top = 0;
  for (int i = 0; i < count; ++i) top = std::max(top, std::abs(values[i]));
  block.scale = top > 0 ? top / B::kTop : 1.0f;
  const float inv = 1.0f / block.scale;
  for (int i = 0; i < B::kValues; ++i) block.set(i, i < count ? int(std::lrint(values[i] * inv)) : 0);
}

// values[0, count) x scale, plus carry[0, count) if given, -> blocks[0, ...); dropped (if given,
// and it may be carry): what the rounding took from each. Returns the blocks used.
template <class B>
int64_t quantize_all(const float* values, float scale, const float* carry, int64_t count, B* blocks, float* dropped) {
  float want[B::kValues];
  int64_t k = 0;
  for (int64_t start = 0; start < count; start += B::kValues, ++k) {
    const int n = int(std::min<int64_t>(B::kValues, count - start));
    for (int i = 0; i < n; ++i) want[i] = values[start + i] * scale + (carry ? carry[start + i] : 0.0f);
    quantize(want, n, blocks[k]);
    if (dropped)
      for (int i = 0; i < n; ++i) dropped[start + i] = want[i] - blocks[k].get(i) * blocks[k].scale;
  }
  return k;
}

template <class B>
void dequantize_all(const B* blocks, int64_t count, float* values) {
  for (int64_t i = 0; i < count; ++i) values[i] = blocks[i / B::kValues].get(int(i % B::kValues)) * blocks[i / B::kValues].scale;
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

// The block type and the reduction of blocks, registered with MPI for the life of the owner.
template <class B>
struct BlockOps {
  BlockOps() {
    static_assert(sizeof(B) == sizeof(float) + sizeof(B::bits), "no padding bytes go over the wire");
    MPI_Type_contiguous(int(sizeof(B)), MPI_BYTE, &type);
    MPI_Type_commit(&type);
    MPI_Op_create(&sum_blocks<B>, 1, &sum);
  }
  ~BlockOps() {
    MPI_Op_free(&sum);
    MPI_Type_free(&type);
  }
  BlockOps(const BlockOps&) = delete;
  BlockOps& operator=(const BlockOps&) = delete;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op sum = MPI_OP_NULL;
};

template <class B>
class AverageBlocks : public WireAverage {
 public:
  AverageBlocks(Comm& comm, int64_t n, const WireOptions& opts)
      : WireAverage(comm, n), out_(size_t(2 * (n / B::kValues + 1))), in_(out_.size()) {
    if (opts.error_feedback) residual_.assign(size_t(n), 0.0f);
  }

 private:
  // A range takes the next free blocks (each range has at most one partial block, so twice
  // n / kValues blocks are enough for any bucketing).
  MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) override {
    const int64_t first = next_block_;
    float* residual = residual_.empty() ? nullptr : &residual_[size_t(lo)];  // carried in, and what rounding drops
    next_block_ += quantize_all(values + lo, scale, residual, hi - lo, &out_[size_t(first)], residual);
    ranges_.push_back({lo, hi, first});
    MPI_Request req;
    comm_.start_allreduce(&out_[size_t(first)], &in_[size_t(first)], int(next_block_ - first), ops_.type, ops_.sum, &req);
    return req;
  }

  void receive() override {
    for (const Range& r : ranges_) dequantize_all(&in_[size_t(r.first_block)], r.hi - r.lo, &averages_[size_t(r.lo)]);
    ranges_.clear();
    next_block_ = 0;
  }

  struct Range {
    int64_t lo, hi, first_block;
  };
  std::vector<B> out_, in_;    // what this rank sends; the sums
  std::vector<Range> ranges_;  // started since the last finish
  int64_t next_block_ = 0;
  BlockOps<B> ops_;
};

template <class B>
class BlockSumOf : public BlockSum {
 public:
  explicit BlockSumOf(int64_t max_count) : out_(size_t(max_count / B::kValues + 1)), in_(out_.size()) {}
  MPI_Request start(Comm& comm, const float* values, int64_t count, float* dropped) override {
    const int64_t blocks = quantize_all(values, 1.0f, nullptr, count, out_.data(), dropped);
    MPI_Request req;
    comm.start_allreduce(out_.data(), in_.data(), int(blocks), ops_.type, ops_.sum, &req);
    return req;
  }
  void read(float* sums, int64_t count) const override { dequantize_all(in_.data(), count, sums); }

 private:
  std::vector<B> out_, in_;
  BlockOps<B> ops_;
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

std::unique_ptr<BlockSum> make_int4_sum(int64_t max_count) { return std::make_unique<BlockSumOf<Block4>>(max_count); }

}  // namespace pitrain
