// int8 and int4 on the wire: about a quarter and an eighth of fp32's bytes. Values travel in
// blocks, each with one scale (max |v| / the largest level), so a block of small values keeps
// its precision next to a block of large ones: int8 a byte a value, int4 levels -7..7 in a
// prefix code. The reduction widens both blocks, adds, and picks a new scale for the sum; with
// error feedback, what a rank's rounding dropped is added to its next values (what the
// reduction's own rounding drops is not: int4's scales cover 64 values, not 256, to keep that
// small). The same int4 sum carries PowerSGD's factors (BlockSum). A block that holds a NaN or
// an infinity goes as NaN whole (a NaN scale, levels 0), so that the sum is NaN too and the
// training step that made it says so, where rounding it would turn a NaN into 0 (int8) or never
// find a scale at which its code fits (int4).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "pitrain/error.h"
#include "pitrain/finite.h"
#include "pitrain/wire.h"

namespace pitrain {
namespace {

float largest_magnitude(const float* values, int count) {
  float top = 0;
  for (int i = 0; i < count; ++i) top = std::max(top, std::abs(values[i]));
  return top;
}

// int8: a byte a value and a float scale, 256 values a block.
struct Block8 {
  static constexpr int kValues = 256;
  float scale;
  int8_t levels[kValues];

  // values[0, count) -> this block (the rest of it zero); decoded (if given): what it carries.
  void encode(const float* values, int count, float* decoded) {
    if (!all_finite(values, count)) return encode_not_a_number(count, decoded);
    const float top = largest_magnitude(values, count);
    scale = top > 0 ? top / 127 : 1.0f;
    const float inv = 1.0f / scale;
    for (int i = 0; i < kValues; ++i)
      levels[i] = int8_t(i < count ? std::lrint(values[i] * inv) : 0);
    if (decoded)
      for (int i = 0; i < count; ++i) decoded[i] = float(levels[i]) * scale;
  }
  void encode_not_a_number(int count, float* decoded) {
    scale = std::numeric_limits<float>::quiet_NaN();
    std::fill_n(levels, kValues, int8_t(0));
    if (decoded) std::fill_n(decoded, count, scale);
  }
  void decode(float* values) const {
    for (int i = 0; i < kValues; ++i) values[i] = float(levels[i]) * scale;
  }
};
static_assert(sizeof(Block8) == 4 + 256, "no padding bytes go over the wire");

// int4's scale travels as a bfloat16, rounded up so that the largest value still fits: two
// bytes where a float takes four. Its 8 bits of precision cost the largest value at most 1/128
// of itself, beside a level's 1/7 (int8's 1/127 would feel it: its scale stays a float).
uint16_t int4_scale_for(float top) {
  const float wanted = top > 0 ? top / 7 : 1.0f;
  uint16_t b = float_to_bf16(wanted);
  if (bf16_to_float(b) < wanted) ++b;  // the next bfloat16 up (wanted is positive)
  return b;
}

// int4: 256 values as levels -7..7 in a prefix code of at most 112 bytes, and a bfloat16 scale
// for each 64: 120 bytes, against 144 for 4 bits a level and a float a scale. Levels are mostly
// small (as in mlp's PowerSGD factors), so small levels get short codes (in the order sent; s:
// the sign, m: |v| - 2 or mm: |v| - 4):
//   0: 00   +-1: 01s   +-2, 3: 10ms   +-4..7: 11mms
// Where the code would not fit, the 64 values whose code is longest take a coarser scale
// (2^(1/4) at a time), until it does: what that rounding drops goes, as any, to the sender's
// error feedback. The four scales share one budget so that a block of many large levels
// borrows from its neighbours: with a budget for each 64 values (28 bytes), 4 ranks of mlp with
// PowerSGD rounds every 16 steps take longer to the target (bench/sync_accuracy.sh).
struct Block4 {
  static constexpr int kScaled = int(kInt4BlockValues), kScales = 4, kValues = kScales * kScaled;
  static constexpr int kCodeBytes = 112;
  static_assert(kCodeBytes * 8 >= 3 * kValues, "every block fits once its levels are 0 and +-1");
  uint16_t scale[kScales];
  uint8_t code[kCodeBytes];

  // A level's code, sign included, least significant bit sent first, and its length; by
  // level + 7.
  struct Code {
    uint8_t bits, length;
  };
  static constexpr Code kCodes[15] = {{0b11111, 5}, {0b11011, 5}, {0b10111, 5}, {0b10011, 5},
                                      {0b1101, 4},  {0b1001, 4},  {0b110, 3},   {0b00, 2},
                                      {0b010, 3},   {0b0001, 4},  {0b0101, 4},  {0b00011, 5},
                                      {0b00111, 5}, {0b01011, 5}, {0b01111, 5}};
  // The next 10 bits -> the two levels they begin with (two codes of at most 5 bits each) and
  // their length: decoding takes two levels a step.
  struct Pair {
    int8_t first, second;
    uint8_t length;
  };
  static const std::array<Pair, 1024>& pairs_by_bits() {
    static const std::array<Pair, 1024> table = [] {
      std::array<Pair, 1024> t{};
      for (int a = -7; a <= 7; ++a)
        for (int b = -7; b <= 7; ++b) {
          const Code ca = kCodes[a + 7], cb = kCodes[b + 7];
          const int length = ca.length + cb.length, bits = ca.bits | cb.bits << ca.length;
          for (int rest = 0; rest < 1024 >> length; ++rest)
            t[size_t(bits | rest << length)] = {int8_t(a), int8_t(b), uint8_t(length)};
        }
      return t;
    }();
    return table;
  }

  // A level's code length as kCodes has it, by arithmetic: a loop over levels that adds these
  // vectorises, one that looks them up does not.
  static constexpr int code_length(int level) {
    const int size = level < 0 ? -level : level;
    return 2 + (size > 0) + (size > 1) + (size > 3);
  }
  static constexpr bool code_lengths_agree() {
    for (int v = -7; v <= 7; ++v)
      if (kCodes[v + 7].length != code_length(v)) return false;
    return true;
  }

  // kScaled values at scale -> level[0, kScaled); returns their code's bits.
  static int round_levels(const float* values, uint16_t scale, int* level) {
    const float inv = 1.0f / bf16_to_float(scale);
    int bits = 0;
    for (int i = 0; i < kScaled; ++i) {
      // Rounded half away from zero, clamped while still a float: a NaN or inf converted to int
      // is undefined (std::max(-7.5f, NaN) is -7.5f, a level of -7).
      const float x = values[i] * inv;
      level[i] = int(std::min(std::max(-7.5f, x + std::copysign(0.5f, x)), 7.5f));
      bits += code_length(level[i]);
    }
    return bits;
  }

  // values[0, count) -> this block (the rest of it zero); decoded (if given): what it carries.
  void encode(const float* values, int count, float* decoded) {
    if (!all_finite(values, count)) return encode_not_a_number(count, decoded);
    // Values, then zeros: every 64 is whole and the loops over it vectorise.
    float padded[kValues] = {};
    std::copy(values, values + count, padded);
    int level[kValues], bits[kScales], total = 0;
    auto round = [&](int j) {  // the j-th 64 values at scale[j]: their levels and code's bits
      return bits[j] = round_levels(padded + j * kScaled, scale[j], level + j * kScaled);
    };
    for (int j = 0; j < kScales; ++j) {
      scale[j] = int4_scale_for(largest_magnitude(padded + j * kScaled, kScaled));
      total += round(j);
    }
    while (total > 8 * kCodeBytes) {
      const int j = int(std::max_element(bits, bits + kScales) - bits);
      scale[j] = int4_scale_for(bf16_to_float(scale[j]) * 7 * 1.1892071f);
      total -= bits[j];
      total += round(j);
    }
    if (decoded) {
      float step[kScales];
      for (int j = 0; j < kScales; ++j) step[j] = bf16_to_float(scale[j]);
      for (int i = 0; i < count; ++i) decoded[i] = float(level[i]) * step[i / kScaled];
    }
    uint64_t pending = 0;  // bits not yet in code[], the first sent lowest
    int have = 0, at = 0;
    auto put = [&](int bytes) {
      for (int b = 0; b < bytes; ++b, pending >>= 8) code[at++] = uint8_t(pending);
    };
    for (int v : level) {  // four bytes at a time (at most 112 of code: they fit)
      pending |= uint64_t(kCodes[v + 7].bits) << have;
      have += kCodes[v + 7].length;
      if (have >= 32) put(4), have -= 32;
    }
    put(kCodeBytes - at);  // the last bits, then zeros
  }
  void encode_not_a_number(int count, float* decoded) {
    std::fill_n(scale, kScales, float_to_bf16(std::numeric_limits<float>::quiet_NaN()));
    std::fill_n(code, kCodeBytes, uint8_t(0));  // every level 0
    if (decoded) std::fill_n(decoded, count, std::numeric_limits<float>::quiet_NaN());
  }
  void decode(float* values) const {
    const std::array<Pair, 1024>& pairs = pairs_by_bits();
    uint64_t pending = 0;
    int have = 0, at = 0;
    float step = 0;
    for (int i = 0; i < kValues; i += 2) {
      if (i % kScaled == 0) step = bf16_to_float(scale[i / kScaled]);
      if (have < 10)  // four bytes at a time (zeros past the code)
        for (int b = 0; b < 4; ++b, have += 8)
          pending |= uint64_t(at < kCodeBytes ? code[at++] : 0) << have;
      const Pair p = pairs[pending & 1023];
      values[i] = float(p.first) * step, values[i + 1] = float(p.second) * step;
      pending >>= p.length;
      have -= p.length;
    }
  }
};
static_assert(sizeof(Block4) == 2 * 4 + 112, "no padding bytes go over the wire");
static_assert(Block4::code_lengths_agree(), "code_length() gives kCodes' lengths");

// (values[0, count) plus carry[0, count) if given) x scale -> blocks[0, ...); dropped (if
// given, and it may be carry): what the rounding took from each, in the values' units (before
// the scale), as local SGD's last agreement reads a residual. Returns the blocks used.
template <class B>
int64_t quantize_all(const float* values, float scale, const float* carry, int64_t count, B* blocks,
                     float* dropped) {
  float want[B::kValues], got[B::kValues];
  const float unscale = 1.0f / scale;
  int64_t k = 0;
  for (int64_t start = 0; start < count; start += B::kValues, ++k) {
    const int n = int(std::min<int64_t>(B::kValues, count - start));
    for (int i = 0; i < n; ++i)
      want[i] = (values[start + i] + (carry ? carry[start + i] : 0.0f)) * scale;
    blocks[k].encode(want, n, dropped ? got : nullptr);
    if (dropped)
      for (int i = 0; i < n; ++i) dropped[start + i] = (want[i] - got[i]) * unscale;
  }
  return k;
}

template <class B>
void dequantize_all(const B* blocks, int64_t count, float* values) {
  float got[B::kValues];
  for (int64_t start = 0, k = 0; start < count; start += B::kValues, ++k) {
    blocks[k].decode(got);
    std::copy(got, got + std::min<int64_t>(B::kValues, count - start), values + start);
  }
}

// MPI reduction of blocks: widen, add, quantise again.
template <class B>
void sum_blocks(void* in, void* inout, int* len, MPI_Datatype*) {
  const B* a = static_cast<const B*>(in);
  B* b = static_cast<B*>(inout);
  float x[B::kValues], y[B::kValues];
  for (int k = 0; k < *len; ++k) {
    a[k].decode(x);
    b[k].decode(y);
    for (int i = 0; i < B::kValues; ++i) x[i] += y[i];
    b[k].encode(x, B::kValues, nullptr);
  }
}

// The block type and the reduction of blocks, registered with MPI for the life of the owner.
template <class B>
struct BlockOps {
  BlockOps() {
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
  ~AverageBlocks() override { wait_in_flight(); }

 private:
  // A range takes the next free blocks: twice n / kValues are enough where every range but the
  // last has at least kValues values (PerStepSync's buckets: --bucket-kb >= 1, 256 floats).
  MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) override {
    const int64_t first = next_block_;
    if (first + (hi - lo + B::kValues - 1) / B::kValues > int64_t(out_.size()))
      throw Error("wire: ranges [" + std::to_string(lo) + ", " + std::to_string(hi) + ") of " +
                  std::to_string(n_) + " values need more blocks than ranges of at least " +
                  std::to_string(B::kValues) + " values would");
    // Carried in, and what rounding drops.
    float* residual = residual_.empty() ? nullptr : &residual_[size_t(lo)];
    next_block_ +=
        quantize_all(values + lo, scale, residual, hi - lo, &out_[size_t(first)], residual);
    ranges_.push_back({lo, hi, first});
    MPI_Request req;
    comm_.start_allreduce(&out_[size_t(first)], &in_[size_t(first)], int(next_block_ - first),
                          ops_.type, ops_.sum, &req);
    return req;
  }

  void receive() override {
    for (const Range& r : ranges_)
      dequantize_all(&in_[size_t(r.first_block)], r.hi - r.lo, &averages_[size_t(r.lo)]);
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
  explicit BlockSumOf(int64_t max_count)
      : out_(size_t(max_count / B::kValues + 1)), in_(out_.size()) {}
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

std::unique_ptr<BlockSum> make_int4_sum(int64_t max_count) {
  return std::make_unique<BlockSumOf<Block4>>(max_count);
}

}  // namespace pitrain
