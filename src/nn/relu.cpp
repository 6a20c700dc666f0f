// ReLU as its own layer (Keras' ReLU); Dense and Conv2D fuse theirs into add_bias instead.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "pitrain/layer_registry.h"

namespace pitrain {
namespace {

class ReLU : public Layer {
 public:
  explicit ReLU(const LayerCall& call) : Layer(call) {}
  Shape output_shape() const override { return in_; }

  void forward(const float* x, float* y, int n, const Context&) override {
    const int64_t count = n * in_.size();
    for (int64_t i = 0; i < count; ++i) y[i] = std::max(x[i], 0.0f);
  }

  // dx = dy where the output is positive, 0 elsewhere.
  void backward(const float*, const float* __restrict y, float* dy, float* __restrict dx,
                int n) override {
    if (!dx) return;
    const int64_t count = n * in_.size();
    for (int64_t i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }

  void keras_config(nlohmann::ordered_json& config) const override {
    config["max_value"] = nullptr;
    config["negative_slope"] = 0.0;
    config["threshold"] = 0.0;
  }
};

}  // namespace

std::unique_ptr<Layer> make_relu(const LayerCall& call) {
  expect_args(call, 0, 0);
  return std::make_unique<ReLU>(call);
}

}  // namespace pitrain
