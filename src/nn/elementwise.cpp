// The layers without a GEMM: ReLU, Flatten, Dropout; and the shared helpers.
#include <algorithm>
#include <cmath>

#include "pitrain/layers.h"
#include "pitrain/rng.h"

namespace pitrain {

int64_t ParamView::size() const {
  int64_t s = 1;
  for (auto d : shape) s *= d;
  return s;
}

int64_t Layer::num_params() const {
  int64_t s = 0;
  for (auto& p : params()) s += p.size();
  return s;
}

void glorot_uniform(float* w, int64_t count, int64_t fan_in, int64_t fan_out, uint64_t key) {
  const float limit = std::sqrt(6.0f / float(fan_in + fan_out));
  for (int64_t i = 0; i < count; ++i) w[i] = (2.0f * uniform01(key, uint64_t(i)) - 1.0f) * limit;
}

void relu_forward(float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = std::max(y[i], 0.0f);
}

void relu_backward(const float* __restrict y, float* __restrict dy, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void add_bias(float* __restrict y, int rows, int cols, const float* __restrict bias, Activation act) {
  for (int r = 0; r < rows; ++r, y += cols)
    if (act == Activation::relu)
      for (int c = 0; c < cols; ++c) y[c] = std::max(y[c] + bias[c], 0.0f);
    else
      for (int c = 0; c < cols; ++c) y[c] += bias[c];
}

void bias_backward(const float* __restrict y, float* __restrict dy, int rows, int cols, float* __restrict dbias,
                   Activation act) {
  std::fill_n(dbias, cols, 0.0f);
  for (int r = 0; r < rows; ++r, y += cols, dy += cols) {
    if (act == Activation::relu)
      for (int c = 0; c < cols; ++c) dy[c] = y[c] > 0.0f ? dy[c] : 0.0f;
    for (int c = 0; c < cols; ++c) dbias[c] += dy[c];
  }
}

void ReLU::forward(const float* x, float* y, int n, const Context&) {
  std::copy_n(x, n * in_.size(), y);
  relu_forward(y, n * in_.size());
}

void ReLU::backward(const float*, const float* y, float* dy, float* dx, int n) {
  if (!dx) return;
  relu_backward(y, dy, n * in_.size());
  std::copy_n(dy, n * in_.size(), dx);
}

// NHWC memory is already in Keras' flatten order: both directions are copies.
void Flatten::forward(const float* x, float* y, int n, const Context&) { std::copy_n(x, n * in_.size(), y); }

void Flatten::backward(const float*, const float*, float* dy, float* dx, int n) {
  if (dx) std::copy_n(dy, n * in_.size(), dx);
}

Dropout::Dropout(Shape in, float rate, int index) : Layer(in), rate_(rate), index_(index) {}

std::string Dropout::describe() const {
  std::string r = std::to_string(rate_);
  r.erase(r.find_last_not_of('0') + 1);
  if (r.back() == '.') r.pop_back();
  return "dropout(" + r + ")";
}

void Dropout::reserve(int batch) { scale_.resize((size_t(batch) * in_.size() + 3) / 4 * 4); }

// Inverted dropout: kept units are scaled by 1/(1-rate) in training, so inference is identity.
// Each 64-bit draw decides four units, 16 bits each (the rate is kept to 1/65536).
void Dropout::forward(const float* x, float* y, int n, const Context& ctx) {
  const int64_t count = n * in_.size();
  last_training_ = ctx.training && rate_ > 0.0f;
  if (!last_training_) {
    std::copy_n(x, count, y);
    return;
  }
  const uint64_t key = rng_key(ctx.dropout_key, uint64_t(index_));
  const uint32_t threshold = uint32_t(rate_ * 65536.0f);
  const float keep_scale = 1.0f / (1.0f - rate_);
  float* __restrict scale = scale_.data();
  for (int64_t block = 0; block * 4 < count; ++block) {
    const uint64_t bits = splitmix64(key + uint64_t(block));
    for (int j = 0; j < 4; ++j) scale[block * 4 + j] = uint32_t(bits >> (16 * j) & 0xffff) < threshold ? 0.0f : keep_scale;
  }
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] * scale[i];
}

void Dropout::backward(const float*, const float*, float* dy, float* dx, int n) {
  if (!dx) return;
  const int64_t count = n * in_.size();
  if (!last_training_) {
    std::copy_n(dy, count, dx);
    return;
  }
  for (int64_t i = 0; i < count; ++i) dx[i] = dy[i] * scale_[size_t(i)];
}

}  // namespace pitrain
