// Optimizers over the flat parameter buffer, with Keras' update rules and defaults, and the
// learning-rate schedule. Every rank runs the same step on the same averaged gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pitrain {

class ThreadPool;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One step over the n parameters; element-wise, so the pool's threads may take a range each.
  // Returns whether every gradient was finite: the update's own pass finds NaN and Inf, where a
  // pass of its own would cost mlp a noticeable part of a step (its gradients no longer in the
  // cache).
  bool step(float* params, const float* grads, int64_t n, float lr, ThreadPool* pool = nullptr);
  // Named state buffers, for checkpoints.
  virtual std::vector<std::pair<std::string, std::vector<float>*>> state() = 0;
  // How noisy the gradients given to step() are against the ones the update is meant for: 1
  // (the default) when they are those; 1/P when each is one of P samples whose mean is what
  // counts, so that only that share of their variance belongs to the mean (local SGD).
  void set_noise_share(float share) { noise_share_ = share; }
  int64_t iterations = 0;  // steps taken (Keras' optimizer.iterations)

 protected:
  virtual void begin_step(float lr) = 0;  // after iterations was counted: the step's constants
  // [lo, hi); false when a gradient there was NaN or Inf.
  virtual bool update(float* params, const float* grads, int64_t lo, int64_t hi) = 0;
  float noise_share_ = 1.0f;
};

// Adam as Keras has it: beta1 0.9, beta2 0.999, epsilon 1e-7 outside the square root.
// With a noise share s < 1 (set_noise_share) the second moment is estimated for the mean the
// gradients sample: a gradient g has E[g^2] = mu^2 + sigma^2, the mean of 1/s of them
// mu^2 + s sigma^2. With mu estimated by the bias-corrected first moment m^, v is fed
// s g^2 + (1 - s) m^2 instead of g^2. Without it, local SGD's per-rank Adam takes steps up to
// sqrt(P) shorter on noisy weights and loses accuracy against per-step sync (bench/RESULTS.md).
class Adam : public Optimizer {
 public:
  explicit Adam(int64_t n, float beta1 = 0.9f, float beta2 = 0.999f, float epsilon = 1e-7f);
  std::string name() const override { return "adam"; }
  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    return {{"m", &m_}, {"v", &v_}};
  }

 private:
  void begin_step(float lr) override;
  bool update(float* params, const float* grads, int64_t lo, int64_t hi) override;
  float beta1_, beta2_, epsilon_;
  float lr_t_ = 0, m_correction_ = 1;  // this step's, with Keras' bias corrections
  std::vector<float> m_, v_;
};

// SGD with momentum as Keras has it: v = momentum * v - lr * g; p += v.
class Sgd : public Optimizer {
 public:
  Sgd(int64_t n, float momentum);
  std::string name() const override { return "sgd"; }
  // Linear in the gradient: the mean of the steps is the step of the mean, whatever the noise.
  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    return {{"velocity", &velocity_}};
  }

 private:
  void begin_step(float lr) override { lr_ = lr; }
  bool update(float* params, const float* grads, int64_t lo, int64_t hi) override;
  float momentum_, lr_ = 0;
  std::vector<float> velocity_;
};

// The optimizers by name (optimizer_names()); an Error for any other name.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, int64_t n, float momentum);
std::vector<std::string> optimizer_names();

// What --lr-scaling multiplies the lr by for a global batch of `ranks` batches: none (1), linear
// (ranks: SGD's rule, Goyal et al., 2017) or sqrt (sqrt(ranks): Adam's, Malladi et al., 2022).
float lr_scale(const std::string& rule, int ranks);
std::vector<std::string> lr_scaling_names();

// Constant, or a linear warm-up from `start` to `peak` over `warmup_steps` (Goyal et al.).
struct LrSchedule {
  float start = 1e-3f, peak = 1e-3f;
  int64_t warmup_steps = 0;
  float at(int64_t step) const;
};

}  // namespace pitrain
