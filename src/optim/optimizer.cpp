#include "pitrain/optimizer.h"

#include <cmath>

#include "pitrain/error.h"

namespace pitrain {

Adam::Adam(int64_t n, float beta1, float beta2, float epsilon)
    : beta1_(beta1), beta2_(beta2), epsilon_(epsilon), m_(size_t(n), 0.0f), v_(size_t(n), 0.0f) {}

namespace {

// One Adam update; Local: v is fed the second moment of a `local_of`-rank average (see Adam).
template <bool Local>
void adam_update(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                 float lr_t, float b1, float b2, float eps, float inv_ranks, float m_correction) {
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    float g2 = g[i] * g[i];
    if constexpr (Local) {
      const float mean = m[i] * m_correction;
      g2 = g2 * inv_ranks + (1.0f - inv_ranks) * mean * mean;
    }
    v[i] = b2 * v[i] + (1.0f - b2) * g2;
    p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  }
}

}  // namespace

void Adam::step(float* p, const float* g, int64_t n, float lr, int local_of) {
  ++iterations;
  const double t = double(iterations);
  const double m_bias = 1.0 - std::pow(double(beta1_), t);
  // Bias correction folded into the step size, as Keras and TensorFlow's Adam do.
  const float lr_t = float(lr * std::sqrt(1.0 - std::pow(double(beta2_), t)) / m_bias);
  if (local_of > 1)
    adam_update<true>(p, g, m_.data(), v_.data(), n, lr_t, beta1_, beta2_, epsilon_, 1.0f / float(local_of),
                      float(1.0 / m_bias));
  else
    adam_update<false>(p, g, m_.data(), v_.data(), n, lr_t, beta1_, beta2_, epsilon_, 1.0f, 1.0f);
}

Sgd::Sgd(int64_t n, float momentum) : momentum_(momentum), velocity_(size_t(n), 0.0f) {}

void Sgd::step(float* __restrict p, const float* __restrict g, int64_t n, float lr, int) {
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
