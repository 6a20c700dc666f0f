// Conv2D: the convolution with its bias and activation (conv.h: direct, im2col or Winograd, by
// shape). The kernel's (kh, kw, Cin, F) layout is Keras'.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "pitrain/conv.h"
#include "pitrain/error.h"
#include "pitrain/keras.h"
#include "pitrain/layer_registry.h"

namespace pitrain {
namespace {

// Rows (and columns) of zeros before the image: Keras' 'same' centres an odd kernel.
int padding(int k, bool same) { return same ? (k - 1) / 2 : 0; }

class Conv2D : public Layer {
 public:
  // k x k kernel, stride 1; same = true pads as Keras 'same', else 'valid'.
  Conv2D(const LayerCall& call, int filters, int k, bool same, Activation act)
      : Layer(call),
        filters_(filters),
        k_(k),
        same_(same),
        act_(act),
        conv_(
            make_conv_algorithm(in_, output_shape(), k, padding(k, same), padding(k, same), act)) {}
  Shape output_shape() const override;
  std::vector<ParamView> params() const override;
  void init_params(uint64_t key) override;
  void reserve(int batch) override;
  int64_t prepared_floats() const override { return conv_->prepared_floats(); }
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;
  int64_t forward_flops() const override;
  bool fuse_next(const Layer& next) override {
    return &next.type() == find_layer_type("maxpool2d") && conv_->fuse_pool();
  }

  void keras_config(nlohmann::ordered_json& config) const override {
    config["filters"] = filters_;
    config["kernel_size"] = {k_, k_};
    config["strides"] = {1, 1};
    config["padding"] = same_ ? "same" : "valid";
    config["data_format"] = "channels_last";
    config["dilation_rate"] = {1, 1};
    config["groups"] = 1;
    config["activation"] = keras_activation(act_);
    add_keras_kernel_config(config);
  }

 private:
  std::string spec_args() const override {
    return std::to_string(filters_) + "," + std::to_string(k_) + (same_ ? ",same" : "") +
           activation_arg(act_);
  }

  int64_t kernel_floats() const { return int64_t(k_) * k_ * in_.c * filters_; }  // the bias follows

  int filters_, k_;
  bool same_;
  Activation act_;
  std::unique_ptr<ConvAlgorithm> conv_;
};

Shape Conv2D::output_shape() const {
  return same_ ? Shape{in_.h, in_.w, filters_} : Shape{in_.h - k_ + 1, in_.w - k_ + 1, filters_};
}

std::vector<ParamView> Conv2D::params() const {
  return {{"kernel", {k_, k_, in_.c, filters_}, 0}, {"bias", {filters_}, kernel_floats()}};
}

void Conv2D::init_params(uint64_t key) {
  const int64_t fan_in = int64_t(k_) * k_ * in_.c, fan_out = int64_t(k_) * k_ * filters_;
  glorot_uniform(w_, kernel_floats(), fan_in, fan_out, key);
  std::fill_n(w_ + kernel_floats(), filters_, 0.0f);
}

void Conv2D::reserve(int batch) { conv_->reserve(batch); }

int64_t Conv2D::forward_flops() const {
  const Shape o = output_shape();
  return 2 * int64_t(o.h) * o.w * filters_ * k_ * k_ * in_.c;
}

void Conv2D::forward(const float* x, float* y, int n, const Context& ctx) {
  if (!ctx.prepared) conv_->prepare(w_, prepared_);
  conv_->forward(x, w_, w_ + kernel_floats(), prepared_, y, n);
}

void Conv2D::backward(const float* x, const float* y, float* dy, float* dx, int n) {
  conv_->backward(x, y, dy, w_, prepared_, dw_, dw_ + kernel_floats(), dx, n);
}

}  // namespace

std::unique_ptr<Layer> make_conv2d(const LayerCall& call) {
  expect_args(call, 2, 4);
  const auto& args = call.args;
  const int filters = positive_int(call, args[0]), k = positive_int(call, args[1]);
  bool same = false;
  Activation act = Activation::none;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "same" || args[i] == "valid")
      same = args[i] == "same";
    else
      act = activation(call, args[i]);
  }
  if (act == Activation::softmax) throw UsageError("model spec: conv2d cannot end in softmax");
  if (!same && (call.in.h < k || call.in.w < k))
    throw UsageError("model spec: conv2d(" + args[0] + "," + args[1] + ") does not fit its " +
                     std::to_string(call.in.h) + "x" + std::to_string(call.in.w) + " input");
  return std::make_unique<Conv2D>(call, filters, k, same, act);
}

}  // namespace pitrain
