// fp16 and bf16 on the wire: half the bytes of fp32. Each rank rounds its share to 16 bits; the
// sums are added in float and rounded back at every reduction step. With error feedback, what a
// rank's rounding dropped is added to its next values, so nothing is lost over time.
#include <cmath>
#include <cstring>

#include "pitrain/wire.h"

namespace pitrain {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

uint16_t float_to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);                 // round to nearest even
}

float bf16_to_float(uint16_t h) { return float_of(uint32_t(h) << 16); }

uint16_t float_to_half(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return uint16_t(sign | 0x7e00);   // NaN
  if (a >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds to >= 65520: infinity
  if (a < 0x38800000) {                                 // below 2^-14: subnormal half
    // Scale so that the half's subnormal step 2^-24 becomes 1, then round to nearest even.
    const float scaled = float_of(a) * 16777216.0f;
    return uint16_t(sign | uint16_t(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  const uint32_t rounded = a + 0xfff + ((a >> 13) & 1);
  return uint16_t(sign | ((rounded - 0x38000000) >> 13));
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  // A subnormal half.
  if (exp == 0) return float_of(sign) + (sign ? -1.0f : 1.0f) * float(mant) / 16777216.0f;
  if (exp == 31) return float_of(sign | 0x7f800000 | (mant << 13));  // inf, NaN
  return float_of(sign | ((exp + 112) << 23) | (mant << 13));
}

namespace {

// MPI reduction of 16-bit floats: widen, add, round back.
template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = narrow(widen(a[i]) + widen(b[i]));
}

template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
class Average16 : public WireAverage {
 public:
  Average16(Comm& comm, int64_t n, const WireOptions& opts)
      : WireAverage(comm, n), out_(size_t(n)), in_(size_t(n)) {
    if (opts.error_feedback) residual_.assign(size_t(n), 0.0f);
    MPI_Op_create(&sum_16bit<widen, narrow>, 1, &sum_op_);
  }
  ~Average16() override {
    wait_in_flight();
    MPI_Op_free(&sum_op_);
  }

 private:
  MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) override {
    const float unscale = 1.0f / scale;
    for (int64_t i = lo; i < hi; ++i) {
      const size_t k = size_t(i);
      const float want = (values[i] + (residual_.empty() ? 0.0f : residual_[k])) * scale;
      out_[k] = narrow(want);
      // In the values' units.
      if (!residual_.empty()) residual_[k] = (want - widen(out_[k])) * unscale;
    }
    MPI_Request req;
    comm_.start_allreduce(out_.data() + lo, in_.data() + lo, int(hi - lo), MPI_UINT16_T, sum_op_,
                          &req);
    return req;
  }
  void receive() override {  // every round of sums covers [0, n)
    for (int64_t i = 0; i < n_; ++i) averages_[size_t(i)] = widen(in_[size_t(i)]);
  }
  std::vector<uint16_t> out_, in_;  // (n) what this rank sends; the sums
  MPI_Op sum_op_ = MPI_OP_NULL;
};

}  // namespace

std::unique_ptr<WireAverage> make_fp16_average(Comm& comm, int64_t n, const WireOptions& opts) {
  return std::make_unique<Average16<half_to_float, float_to_half>>(comm, n, opts);
}

std::unique_ptr<WireAverage> make_bf16_average(Comm& comm, int64_t n, const WireOptions& opts) {
  return std::make_unique<Average16<bf16_to_float, float_to_bf16>>(comm, n, opts);
}

}  // namespace pitrain
