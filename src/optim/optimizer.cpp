#include "pitrain/optimizer.h"

#include <cmath>

#include "pitrain/error.h"

namespace pitrain {

Adam::Adam(int64_t n, float beta1, float beta2, float epsilon)
    : beta1_(beta1), beta2_(beta2), epsilon_(epsilon), m_(size_t(n), 0.0f), v_(size_t(n), 0.0f) {}

void Adam::step(float* __restrict p, const float* __restrict g, int64_t n, float lr) {
  ++iterations;
  const double t = double(iterations);
  // Bias correction folded into the step size, as Keras and TensorFlow's Adam do.
  const float lr_t = float(lr * std::sqrt(1.0 - std::pow(double(beta2_), t)) / (1.0 - std::pow(double(beta1_), t)));
  float* __restrict m = m_.data();
  float* __restrict v = v_.data();
  const float b1 = beta1_, b2 = beta2_, eps = epsilon_;
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  }
}

Sgd::Sgd(int64_t n, float momentum) : momentum_(momentum), velocity_(size_t(n), 0.0f) {}

void Sgd::step(float* __restrict p, const float* __restrict g, int64_t n, float lr) {
  ++iterations;
  float* __restrict v = velocity_.data();
  for (int64_t i = 0; i < n; ++i) {
    v[i] = momentum_ * v[i] - lr * g[i];
    p[i] += v[i];
  }
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, int64_t n, float momentum) {
  if (name == "adam") return std::make_unique<Adam>(n);
  if (name == "sgd") return std::make_unique<Sgd>(n, momentum);
  throw UsageError("--optimizer " + name + ": unknown optimizer (use adam or sgd)");
}

float LrSchedule::at(int64_t step) const {
  if (step >= warmup_steps) return peak;
  return start + (peak - start) * float(step) / float(warmup_steps);
}

}  // namespace pitrain
