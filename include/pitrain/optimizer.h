// Optimizers over the flat parameter buffer, with Keras' update rules and defaults, and the
// learning-rate schedule. Every rank runs the same step on the same averaged gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pitrain {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // `local_of` > 1: local SGD, `grads` is this rank's own gradient and its step will be averaged
  // with those of `local_of` ranks (1: the gradients were already averaged).
  virtual void step(float* params, const float* grads, int64_t n, float lr, int local_of = 1) = 0;
  // Named state buffers, for checkpoints.
  virtual std::vector<std::pair<std::string, std::vector<float>*>> state() = 0;
  int64_t iterations = 0;  // steps taken (Keras' optimizer.iterations)
};

// Adam as Keras has it: beta1 0.9, beta2 0.999, epsilon 1e-7 outside the square root.
// In local SGD (local_of = P > 1) the second moment is estimated for the average of P ranks'
// gradients, the one synchronous training divides by: a rank's own gradient g has
// E[g^2] = mu^2 + s^2, the P-rank average mu^2 + s^2 / P. With mu estimated by the bias-corrected
// first moment m^, v is fed g^2 / P + (1 - 1/P) m^2 instead of g^2. Plain per-rank Adam takes
// steps up to sqrt(P) shorter on noisy weights and ended 1.2 points of validation accuracy below
// per-step sync even at K = 2 (bench/RESULTS.md).
class Adam : public Optimizer {
 public:
  explicit Adam(int64_t n, float beta1 = 0.9f, float beta2 = 0.999f, float epsilon = 1e-7f);
  std::string name() const override { return "adam"; }
  void step(float* params, const float* grads, int64_t n, float lr, int local_of = 1) override;
  std::vector<std::pair<std::string, std::vector<float>*>> state() override { return {{"m", &m_}, {"v", &v_}}; }

 private:
  float beta1_, beta2_, epsilon_;
  std::vector<float> m_, v_;
};

// SGD with momentum as Keras has it: v = momentum * v - lr * g; p += v.
class Sgd : public Optimizer {
 public:
  Sgd(int64_t n, float momentum);
  std::string name() const override { return "sgd"; }
  // Linear in the gradient, so averaging local steps needs no correction: local_of is unused.
  void step(float* params, const float* grads, int64_t n, float lr, int local_of = 1) override;
  std::vector<std::pair<std::string, std::vector<float>*>> state() override { return {{"velocity", &velocity_}}; }

 private:
  float momentum_;
  std::vector<float> velocity_;
};

// "adam" or "sgd"; UsageError otherwise.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, int64_t n, float momentum);

// Constant, or a linear warm-up from `start` to `peak` over `warmup_steps` (Goyal et al.).
struct LrSchedule {
  float start = 1e-3f, peak = 1e-3f;
  int64_t warmup_steps = 0;
  float at(int64_t step) const;
};

}  // namespace pitrain
