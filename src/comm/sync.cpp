#include "pitrain/sync.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "pitrain/error.h"

namespace pitrain {

WireType parse_wire_type(const std::string& name) {
  if (name == "fp32") return WireType::fp32;
  if (name == "fp16") return WireType::fp16;
  if (name == "bf16") return WireType::bf16;
  throw UsageError("--grad-dtype " + name + ": use fp32, fp16 or bf16");
}

std::string wire_type_name(WireType wire) {
  return wire == WireType::fp32 ? "fp32" : wire == WireType::fp16 ? "fp16" : "bf16";
}

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
  if (a > 0x7f800000) return uint16_t(sign | 0x7e00);            // NaN
  if (a >= 0x477ff000) return uint16_t(sign | 0x7c00);           // rounds to >= 65520: infinity
  if (a < 0x38800000) {                                          // below 2^-14: subnormal half
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
  if (exp == 0) return float_of(sign) + (sign ? -1.0f : 1.0f) * float(mant) / 16777216.0f;  // subnormal
  if (exp == 31) return float_of(sign | 0x7f800000 | (mant << 13));                         // inf, NaN
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

}  // namespace

GradientSync::GradientSync(Comm& comm, const float* params, int64_t n_params, const SyncOptions& opts)
    : comm_(comm), n_(n_params), o_(opts), started_down_to_(n_params) {
  if (o_.sync_every < 1) throw UsageError("--sync-every must be a positive number of steps");
  if (o_.sync_warmup < 0) throw UsageError("--sync-warmup must be 0 or positive");
  if (o_.bucket_bytes <= 0) throw UsageError("--bucket-kb must be positive");
  sums_.resize(size_t(n_));
  if (o_.wire == WireType::fp32) {
    out32_.resize(size_t(n_));
  } else {
    out16_.resize(size_t(n_)), in16_.resize(size_t(n_));
    if (o_.error_feedback) residual_.assign(size_t(n_), 0.0f);
    const bool half = o_.wire == WireType::fp16;
    narrow_ = half ? float_to_half : float_to_bf16;
    widen_ = half ? half_to_float : bf16_to_float;
    MPI_Op_create(half ? &sum_16bit<half_to_float, float_to_half> : &sum_16bit<bf16_to_float, float_to_bf16>, 1,
                  &sum_op_);
  }
  if (o_.sync_every > 1) anchor_.assign(params, params + n_), delta_.resize(size_t(n_));
}

GradientSync::~GradientSync() {
  if (!requests_.empty()) MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  if (sum_op_ != MPI_OP_NULL) MPI_Op_free(&sum_op_);
}

bool GradientSync::averages_gradients(int64_t step) const {
  return comm_.size() > 1 && (o_.sync_every == 1 || step < o_.sync_warmup);
}

bool GradientSync::averages_parameters_after(int64_t step) const {
  return comm_.size() > 1 && o_.sync_every > 1 && step >= o_.sync_warmup &&
         (step + 1 - o_.sync_warmup) % o_.sync_every == 0;
}

// Divides before summing, so a 16-bit sum of P ranks cannot overflow where one rank's would not.
void GradientSync::start_sum(const float* values, int64_t lo, int64_t hi) {
  const float inv = 1.0f / float(comm_.size());
  const int count = int(hi - lo);
  MPI_Request req;
  if (o_.wire == WireType::fp32) {
    for (int64_t i = lo; i < hi; ++i) out32_[size_t(i)] = values[i] * inv;
    comm_.start_allreduce(out32_.data() + lo, sums_.data() + lo, count, MPI_FLOAT, MPI_SUM, &req);
  } else {
    for (int64_t i = lo; i < hi; ++i) {
      const float want = values[i] * inv + (residual_.empty() ? 0.0f : residual_[size_t(i)]);
      out16_[size_t(i)] = narrow_(want);
      if (!residual_.empty()) residual_[size_t(i)] = want - widen_(out16_[size_t(i)]);
    }
    comm_.start_allreduce(out16_.data() + lo, in16_.data() + lo, count, MPI_UINT16_T, sum_op_, &req);
  }
  requests_.push_back(req);
}

void GradientSync::wait_sums() {
  comm_.wait_all(requests_);
  requests_.clear();
  if (o_.wire != WireType::fp32)  // every sum started covers [0, n)
    for (int64_t i = 0; i < n_; ++i) sums_[size_t(i)] = widen_(in16_[size_t(i)]);
}

void GradientSync::gradients_ready(float* grads, int64_t lo) {
  if (!o_.overlap) return;
  while (started_down_to_ - lo >= o_.bucket_bytes / 4) {
    const int64_t hi = started_down_to_;
    started_down_to_ = hi - o_.bucket_bytes / 4;
    start_sum(grads, started_down_to_, hi);
  }
  progress();
}

void GradientSync::finish(float* grads) {
  if (started_down_to_ > 0) start_sum(grads, 0, started_down_to_);
  wait_sums();
  std::copy(sums_.begin(), sums_.end(), grads);
  started_down_to_ = n_;
}

void GradientSync::start_round(const float* params, int64_t step) {
  for (int64_t i = 0; i < n_; ++i) delta_[size_t(i)] = params[i] - anchor_[size_t(i)];
  start_sum(delta_.data(), 0, n_);
  round_step_ = step;
}

// New anchor = old anchor + the mean of what was sent. A rank that took steps since the round
// started keeps them on top of the new anchor; one that did not takes the anchor itself, so that
// all such ranks hold the same bits.
void GradientSync::finish_round(float* params, int64_t step) {
  if (round_step_ < 0) return;
  wait_sums();
  const bool moved = step != round_step_;
  for (int64_t i = 0; i < n_; ++i) {
    const size_t k = size_t(i);
    anchor_[k] += sums_[k];
    params[i] = moved ? params[i] + sums_[k] - delta_[k] : anchor_[k];
  }
  round_step_ = -1;
}

void GradientSync::maybe_average_parameters(float* params, int64_t step, bool force) {
  if (comm_.size() == 1 || o_.sync_every == 1) return;
  if (averages_gradients(step)) {  // warm-up: the ranks stay equal; the last step is the anchor
    if (step + 1 == o_.sync_warmup) std::copy(params, params + n_, anchor_.begin());
    return;
  }
  if (step != averaged_after_ && (force || averages_parameters_after(step))) {
    finish_round(params, step);
    start_round(params, step);
    averaged_after_ = step;
    if (!o_.overlap) finish_round(params, step);
  }
  if (force) finish_round(params, step);
  progress();
}

}  // namespace pitrain
