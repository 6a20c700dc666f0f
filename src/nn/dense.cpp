// Dense: y = x W + b with W (in, units), Keras' kernel layout.
#include <algorithm>

#include "pitrain/layers.h"
#include "pitrain/matrix.h"

namespace pitrain {

Dense::Dense(Shape in, int units, Activation act) : Layer(in), units_(units), act_(act) {}

std::string Dense::describe() const {
  const char* act = act_ == Activation::relu ? ",relu" : act_ == Activation::softmax ? ",softmax" : "";
  return "dense(" + std::to_string(units_) + act + ")";
}

std::vector<ParamView> Dense::params() const {
  return {{"kernel", {in_.size(), units_}, 0}, {"bias", {units_}, in_.size() * units_}};
}

void Dense::init_params(uint64_t key) {
  glorot_uniform(w_, in_.size() * units_, in_.size(), units_, key);
  std::fill_n(w_ + in_.size() * units_, units_, 0.0f);
}

void Dense::forward(const float* x, float* y, int n, const Context&) {
  const int d = int(in_.size());
  gemm(false, false, n, units_, d, x, w_, y);
  add_bias(y, n, units_, w_ + int64_t(d) * units_, act_);
}

void Dense::backward(const float* x, const float* y, float* dy, float* dx, int n) {
  const int d = int(in_.size());
  bias_backward(y, dy, n, units_, dw_ + int64_t(d) * units_, act_);
  gemm(true, false, d, units_, n, x, dy, dw_);  // dW = x^T dY
  if (dx) gemm(false, true, n, d, units_, dy, w_, dx);  // dx = dY W^T
}

}  // namespace pitrain
