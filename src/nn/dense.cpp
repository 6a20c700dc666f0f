// Dense: y = x W + b with W (in, units), Keras' kernel layout; x (n, in), y (n, units).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "pitrain/error.h"
#include "pitrain/keras.h"
#include "pitrain/layer_registry.h"
#include "pitrain/matrix.h"

namespace pitrain {
namespace {

class Dense : public Layer {
 public:
  Dense(const LayerCall& call, int units, Activation act) : Layer(call), units_(units), act_(act) {}
  Shape output_shape() const override { return {1, 1, units_, true}; }
  int64_t forward_flops() const override { return 2 * in_.size() * units_; }

  void keras_config(nlohmann::ordered_json& config) const override {
    config["units"] = units_;
    config["activation"] = keras_activation(act_);
    add_keras_kernel_config(config);
  }

  std::vector<ParamView> params() const override {
    return {{"kernel", {in_.size(), units_}, 0}, {"bias", {units_}, in_.size() * units_}};
  }

  void init_params(uint64_t key) override {
    glorot_uniform(w_, in_.size() * units_, in_.size(), units_, key);
    std::fill_n(w_ + in_.size() * units_, units_, 0.0f);
  }

  void forward(const float* x, float* y, int n, const Context&) override {
    const int d = int(in_.size());
    gemm(false, false, n, units_, d, x, w_, y);
    add_bias(y, n, units_, w_ + int64_t(d) * units_, act_);
  }

  void backward(const float* x, const float* y, float* dy, float* dx, int n) override {
    const int d = int(in_.size());
    bias_backward(y, dy, n, units_, dw_ + int64_t(d) * units_, act_);
    gemm(true, false, d, units_, n, x, dy, dw_);  // dW = x^T dY
    if (dx) gemm(false, true, n, d, units_, dy, w_, dx);  // dx = dY W^T
  }

 private:
  std::string spec_args() const override { return std::to_string(units_) + activation_arg(act_); }

  int units_;
  Activation act_;
};

}  // namespace

std::unique_ptr<Layer> make_dense(const LayerCall& call) {
  expect_args(call, 1, 2);
  const int units = positive_int(call, call.args[0]);
  const Activation act = call.args.size() == 2 ? activation(call, call.args[1]) : Activation::none;
  if (call.in.h != 1 || call.in.w != 1) throw UsageError("model spec: dense needs a flat input; put flatten before it");
  return std::make_unique<Dense>(call, units, act);
}

}  // namespace pitrain
