#include "pitrain/optimizer.h"

#include <cmath>

#include "pitrain/error.h"


namespace pitrain {

Adam::Adam(int64_t n, float beta1, float beta2, float epsilon)
    : beta1_(beta1), beta2_(beta2), epsilon_(epsilon), m_(size_t(n), 0.0f), v_(size_t(n), 0.0f) {}

namespace {

// One Adam update; Noisy: v is fed the second moment of the mean the gradients sample (see Adam).
template <bool Noisy>
void adam_update(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                 float lr_t, float b1, float b2, float eps, float share, float m_correction) {
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    float g2 = g[i] * g[i];
    if constexpr (Noisy) {
      const float mean = m[i] * m_correction;
      g2 = g2 * share + (1.0f - share) * mean * mean;
    }
    v[i] = b2 * v[i] + (1.0f - b2) * g2;
    p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  }
}

}  // namespace

void Adam::step(float* p, const float* g, int64_t n, float lr) {
  ++iterations;
  const double t = double(iterations);
  const double m_bias = 1.0 - std::pow(double(beta1_), t);
  // Bias correction folded into the step size, as Keras and TensorFlow's Adam do.
  const float lr_t = float(lr * std::sqrt(1.0 - std::pow(double(beta2_), t)) / m_bias);
  if (noise_share_ < 1.0f)
    adam_update<true>(p, g, m_.data(), v_.data(), n, lr_t, beta1_, beta2_, epsilon_, noise_share_, float(1.0 / m_bias));
  else
    adam_update<false>(p, g, m_.data(), v_.data(), n, lr_t, beta1_, beta2_, epsilon_, 1.0f, 1.0f);
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

namespace {

struct OptimizerType {
  const char* name;
  std::unique_ptr<Optimizer> (*make)(int64_t n, float momentum);
};

const OptimizerType kOptimizers[] = {
    {"adam", [](int64_t n, float) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(n); }},
    {"sgd", [](int64_t n, float momentum) -> std::unique_ptr<Optimizer> { return std::make_unique<Sgd>(n, momentum); }},
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, int64_t n, float momentum) {
  for (const auto& o : kOptimizers)
    if (name == o.name) return o.make(n, momentum);
  throw Error("unknown optimizer '" + name + "'");
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const auto& o : kOptimizers) names.push_back(o.name);
  return names;
}

float LrSchedule::at(int64_t step) const {
  if (step >= warmup_steps) return peak;
  return start + (peak - start) * float(step) / float(warmup_steps);
}

}  // namespace pitrain
