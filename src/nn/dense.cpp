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
  const int64_t d = in_.size();
  MatrixView out(y, n, units_);
  out.noalias() = ConstMatrixView(x, n, d) * ConstMatrixView(w_, d, units_);
  out.rowwise() += ConstVectorView(w_ + d * units_, units_);
  if (act_ == Activation::relu) relu_forward(y, int64_t(n) * units_);
}

void Dense::backward(const float* x, const float* y, float* dy, float* dx, int n) {
  const int64_t d = in_.size();
  if (act_ == Activation::relu) relu_backward(y, dy, int64_t(n) * units_);
  ConstMatrixView grad_out(dy, n, units_), kernel(w_, d, units_);
  MatrixView(dw_, d, units_).noalias() = ConstMatrixView(x, n, d).transpose() * grad_out;
  VectorView(dw_ + d * units_, units_) = grad_out.colwise().sum();
  if (dx) MatrixView(dx, n, d).noalias() = grad_out * kernel.transpose();
}

}  // namespace pitrain
