// Flatten: (H, W, C) to (H*W*C). NHWC memory is already in Keras' flatten order (channels
// fastest), so both directions are copies.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "pitrain/layer_registry.h"

namespace pitrain {
namespace {

class Flatten : public Layer {
 public:
  explicit Flatten(const LayerCall& call) : Layer(call) {}
  Shape output_shape() const override { return {1, 1, int(in_.size()), true}; }

  void forward(const float* x, float* y, int n, const Context&) override {
    std::copy_n(x, n * in_.size(), y);
  }

  void backward(const float*, const float*, float* dy, float* dx, int n) override {
    if (dx) std::copy_n(dy, n * in_.size(), dx);
  }

  void keras_config(nlohmann::ordered_json& config) const override {
    config["data_format"] = "channels_last";
  }
};

}  // namespace

std::unique_ptr<Layer> make_flatten(const LayerCall& call) {
  expect_args(call, 0, 0);
  return std::make_unique<Flatten>(call);
}

}  // namespace pitrain
