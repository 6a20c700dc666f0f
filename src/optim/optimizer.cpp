#include "pitrain/optimizer.h"

#include <atomic>
#include <cmath>
#include <cstdint>

#include "pitrain/error.h"
#include "pitrain/finite.h"
#include "pitrain/thread_pool.h"
#include "pitrain/vector_copies.h"

namespace pitrain {

Adam::Adam(int64_t n, float beta1, float beta2, float epsilon)
    : beta1_(beta1), beta2_(beta2), epsilon_(epsilon), m_(size_t(n), 0.0f), v_(size_t(n), 0.0f) {}

namespace {

// One Adam update; Noisy: v is fed the second moment of the mean the gradients sample (see Adam).
// It is most of a small model's step (mlp at batch 8: half of it, in sqrt and division), so it
// runs in the CPU's vector width (vector_copies.h); every copy gives the same bits, so that the
// ranks of a cluster of different x86 CPUs keep equal weights.
template <bool Noisy>
PITRAIN_VECTOR_COPIES_SAME_BITS bool adam_update(float* __restrict p, const float* __restrict g,
                                                 float* __restrict m, float* __restrict v,
                                                 int64_t n, float lr_t, float b1, float b2,
                                                 float eps, float share, float m_correction) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= non_finite_bit(g[i]);
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    float g2 = g[i] * g[i];
    if constexpr (Noisy) {
      const float mean = m[i] * m_correction;
      g2 = g2 * share + (1.0f - share) * mean * mean;
    }
    v[i] = b2 * v[i] + (1.0f - b2) * g2;
    p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  }
  return !(bad & kNonFinite);
}

}  // namespace

bool Optimizer::step(float* params, const float* grads, int64_t n, float lr, ThreadPool* pool) {
  ++iterations;
  begin_step(lr);
  if (!pool) return update(params, grads, 0, n);
  std::atomic<bool> finite{true};
  pool->run_ranges(n, [&](int64_t lo, int64_t hi) {
    if (!update(params, grads, lo, hi)) finite = false;
  });
  return finite;
}

// Bias correction folded into the step size, as Keras and TensorFlow's Adam do.
void Adam::begin_step(float lr) {
  const double t = double(iterations);
  const double m_bias = 1.0 - std::pow(double(beta1_), t);
  lr_t_ = float(lr * std::sqrt(1.0 - std::pow(double(beta2_), t)) / m_bias);
  m_correction_ = float(1.0 / m_bias);
}

bool Adam::update(float* p, const float* g, int64_t lo, int64_t hi) {
  float *m = m_.data() + lo, *v = v_.data() + lo;
  if (noise_share_ < 1.0f)
    return adam_update<true>(p + lo, g + lo, m, v, hi - lo, lr_t_, beta1_, beta2_, epsilon_,
                             noise_share_, m_correction_);
  return adam_update<false>(p + lo, g + lo, m, v, hi - lo, lr_t_, beta1_, beta2_, epsilon_, 1.0f,
                            1.0f);
}

Sgd::Sgd(int64_t n, float momentum) : momentum_(momentum), velocity_(size_t(n), 0.0f) {}

bool Sgd::update(float* __restrict p, const float* __restrict g, int64_t lo, int64_t hi) {
  float* __restrict v = velocity_.data();
  uint32_t bad = 0;
  for (int64_t i = lo; i < hi; ++i) {
    bad |= non_finite_bit(g[i]);
    v[i] = momentum_ * v[i] - lr_ * g[i];
    p[i] += v[i];
  }
  return !(bad & kNonFinite);
}

namespace {

struct OptimizerType {
  const char* name;
  std::unique_ptr<Optimizer> (*make)(int64_t n, float momentum);
};

const OptimizerType kOptimizers[] = {
    {"adam",
     [](int64_t n, float) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(n); }},
    {"sgd",
     [](int64_t n, float momentum) -> std::unique_ptr<Optimizer> {
       return std::make_unique<Sgd>(n, momentum);
     }},
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

namespace {

// --lr-scaling: the factor on the one-process lr for a global batch of `ranks` batches.
struct LrScaling {
  const char* name;
  float (*scale)(int ranks);
};
const LrScaling kLrScalings[] = {
    {"none", [](int) { return 1.0f; }},
    {"linear", [](int ranks) { return float(ranks); }},
    {"sqrt", [](int ranks) { return std::sqrt(float(ranks)); }},
};

}  // namespace

float lr_scale(const std::string& rule, int ranks) {
  for (const auto& r : kLrScalings)
    if (rule == r.name) return r.scale(ranks);
  // The command line checked it against lr_scaling_names().
  throw Error("unknown --lr-scaling " + rule);
}

std::vector<std::string> lr_scaling_names() {
  std::vector<std::string> names;
  for (const auto& r : kLrScalings) names.push_back(r.name);
  return names;
}

float LrSchedule::at(int64_t step) const {
  if (step >= warmup_steps) return peak;
  return start + (peak - start) * float(step) / float(warmup_steps);
}

}  // namespace pitrain
