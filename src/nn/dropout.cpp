// Inverted dropout: kept units are scaled by 1/(1-rate) in training, so inference is identity.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "pitrain/layer_registry.h"
#include "pitrain/rng.h"

namespace pitrain {
namespace {

class Dropout : public Layer {
 public:
  Dropout(const LayerCall& call, float rate) : Layer(call), rate_(rate), index_(call.index) {}
  Shape output_shape() const override { return in_; }
  void reserve(int batch) override { scale_.resize(size_t(batch) * in_.size()); }

  // Each 64-bit draw decides four units, 16 bits each (the rate is kept to 1/65536). Draws are
  // numbered by unit in the whole batch, so a thread's share gets the batch's own mask.
  void forward(const float* x, float* y, int n, const Context& ctx) override {
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
    // This share's first unit.
    const uint64_t first = uint64_t(ctx.first_row) * uint64_t(in_.size());
    // Unit u of the batch is decided by bits [16 lane, 16 lane + 16), lane = u % 4, of draw u / 4.
    auto draw = [&](int64_t i) { return splitmix64(key + (first + uint64_t(i)) / 4); };
    auto lane_of = [&](int64_t i) { return int((first + uint64_t(i)) % 4); };
    // Keep or drop is a coin toss: keep_scale's bits masked to 0 or kept, not a branch the CPU
    // would mispredict (GCC turns a select of two floats into one).
    uint32_t keep_bits;
    std::memcpy(&keep_bits, &keep_scale, sizeof keep_bits);
    auto keep = [&](uint64_t bits, int lane) {
      const uint32_t scale_bits =
          keep_bits & (0u - uint32_t(uint32_t(bits >> (16 * lane) & 0xffff) >= threshold));
      float f;
      std::memcpy(&f, &scale_bits, sizeof f);
      return f;
    };
    int64_t i = 0;
    // Up to a whole draw.
    for (; i < count && lane_of(i) != 0; ++i) scale[i] = keep(draw(i), lane_of(i));
    for (; i + 4 <= count; i += 4) {  // whole draws, lanes 0-3: the common case
      const uint64_t bits = draw(i);
      for (int j = 0; j < 4; ++j) scale[i + j] = keep(bits, j);
    }
    for (; i < count; ++i) scale[i] = keep(draw(i), lane_of(i));
    for (int64_t i = 0; i < count; ++i) y[i] = x[i] * scale[i];
  }

  void backward(const float*, const float*, float* dy, float* dx, int n) override {
    if (!dx) return;
    const int64_t count = n * in_.size();
    if (!last_training_) {
      std::copy_n(dy, count, dx);
      return;
    }
    for (int64_t i = 0; i < count; ++i) dx[i] = dy[i] * scale_[size_t(i)];
  }

  // The rate as written (0.2, not float 0.2's 0.200000003).
  void keras_config(nlohmann::ordered_json& config) const override {
    config["rate"] = std::stod(spec_args());
    config["noise_shape"] = nullptr;
    config["seed"] = nullptr;
  }

 private:
  // The shortest text that reads back as the same float: 0.5 -> "0.5", 0.2 -> "0.2" (not
  // 0.200000003), 0.9999999 -> "0.9999999". The spec text rebuilds the layer (the threads'
  // copies, a checkpoint): a rate rounded there would give a share or a resumed run other masks.
  std::string spec_args() const override {
    for (int digits = 1;; ++digits) {
      char text[32];
      std::snprintf(text, sizeof text, "%.*g", digits, double(rate_));
      if (std::strtof(text, nullptr) == rate_) return text;
    }
  }

  float rate_;
  int index_;  // the layer's position in the model: each dropout layer draws its own mask
  std::vector<float> scale_;  // (n, in): 0 or 1/(1-rate), of the last training forward
  bool last_training_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_dropout(const LayerCall& call) {
  expect_args(call, 1, 1);
  return std::make_unique<Dropout>(call, rate(call, call.args[0]));
}

}  // namespace pitrain
