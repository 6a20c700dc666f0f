// Conv2D as im2col + one GEMM per batch: (n*Ho*Wo, k*k*Cin) x (k*k*Cin, F). The kernel's
// (kh, kw, Cin, F) layout is Keras', and flattened row-major it is exactly the GEMM's right side.
#include <algorithm>

#include "pitrain/error.h"
#include "pitrain/layer_registry.h"
#include "pitrain/matrix.h"

namespace pitrain {
namespace {

class Conv2D : public Layer {
 public:
  // k x k kernel, stride 1; same = true pads as Keras 'same', else 'valid'.
  Conv2D(const LayerCall& call, int filters, int k, bool same, Activation act)
      : Layer(call), filters_(filters), k_(k), pad_top_(same ? (k - 1) / 2 : 0), pad_left_(pad_top_), same_(same),
        act_(act) {}
  Shape output_shape() const override;
  std::vector<ParamView> params() const override;
  void init_params(uint64_t key) override;
  void reserve(int batch) override;
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;
  int64_t forward_flops() const override;

 private:
  std::string spec_args() const override {
    return std::to_string(filters_) + "," + std::to_string(k_) + (same_ ? ",same" : "") + activation_arg(act_);
  }

  int filters_, k_, pad_top_, pad_left_;
  bool same_;
  Activation act_;
  std::vector<float> col_;  // (n*Ho*Wo, k*k*Cin): the im2col patches, kept for backward
};

Shape Conv2D::output_shape() const {
  return same_ ? Shape{in_.h, in_.w, filters_} : Shape{in_.h - k_ + 1, in_.w - k_ + 1, filters_};
}

std::vector<ParamView> Conv2D::params() const {
  const int64_t kernel = int64_t(k_) * k_ * in_.c * filters_;
  return {{"kernel", {k_, k_, in_.c, filters_}, 0}, {"bias", {filters_}, kernel}};
}

void Conv2D::init_params(uint64_t key) {
  const int64_t fan_in = int64_t(k_) * k_ * in_.c, fan_out = int64_t(k_) * k_ * filters_;
  glorot_uniform(w_, fan_in * filters_, fan_in, fan_out, key);
  std::fill_n(w_ + fan_in * filters_, filters_, 0.0f);
}

void Conv2D::reserve(int batch) { col_.resize(size_t(batch) * output_shape().h * output_shape().w * k_ * k_ * in_.c); }

int64_t Conv2D::forward_flops() const {
  const Shape o = output_shape();
  return 2 * int64_t(o.h) * o.w * filters_ * k_ * k_ * in_.c;
}

// Walks every (output pixel, kernel row) pair of the im2col matrix. A kernel row spans k taps
// that are contiguous in NHWC memory (k*Cin floats), so the part inside the image is one run:
// visit(patch, image, count) for it, pad(patch, count) for the parts in the zero padding.
template <class Image, class Visit, class Pad>
void for_each_patch_row(Shape in, Shape out, int k, int pad_top, int pad_left, int n, float* col, Image* image,
                        Visit visit, Pad pad) {
  const int cin = in.c, row = k * cin;
  float* patch = col;
  for (int s = 0; s < n; ++s)
    for (int oh = 0; oh < out.h; ++oh)
      for (int ow = 0; ow < out.w; ++ow)
        for (int i = 0; i < k; ++i, patch += row) {
          const int ih = oh + i - pad_top, iw = ow - pad_left;
          if (ih < 0 || ih >= in.h) {
            pad(patch, row);
            continue;
          }
          const int first = std::max(0, -iw), last = std::min(k, in.w - iw);  // taps inside the image
          if (first > 0) pad(patch, first * cin);
          visit(patch + first * cin, image + ((int64_t(s) * in.h + ih) * in.w + iw + first) * cin, (last - first) * cin);
          if (last < k) pad(patch + last * cin, (k - last) * cin);
        }
}

void Conv2D::forward(const float* x, float* y, int n, const Context&) {
  const Shape o = output_shape();
  for_each_patch_row(in_, o, k_, pad_top_, pad_left_, n, col_.data(), x,
                     [](float* patch, const float* img, int count) { std::copy_n(img, count, patch); },
                     [](float* patch, int count) { std::fill_n(patch, count, 0.0f); });
  const int rows = n * o.h * o.w, depth = k_ * k_ * in_.c;
  gemm(false, false, rows, filters_, depth, col_.data(), w_, y);
  add_bias(y, rows, filters_, w_ + depth * filters_, act_);
}

void Conv2D::backward(const float*, const float* y, float* dy, float* dx, int n) {
  const Shape o = output_shape();
  const int rows = n * o.h * o.w, depth = k_ * k_ * in_.c;
  bias_backward(y, dy, rows, filters_, dw_ + depth * filters_, act_);
  gemm(true, false, depth, filters_, rows, col_.data(), dy, dw_);  // dW = col^T dY
  if (!dx) return;
  gemm(false, true, rows, depth, filters_, dy, w_, col_.data());  // the patches are spent: d(col) = dY W^T
  std::fill_n(dx, int64_t(n) * in_.size(), 0.0f);
  for_each_patch_row(in_, o, k_, pad_top_, pad_left_, n, col_.data(), dx,
                     [](const float* patch, float* img, int count) {
                       for (int c = 0; c < count; ++c) img[c] += patch[c];
                     },
                     [](float*, int) {});
}

}  // namespace

std::unique_ptr<Layer> make_conv2d(const LayerCall& call) {
  expect_args(call, 2, 4);
  const auto& args = call.args;
  const int filters = positive_int(call, args[0]), k = positive_int(call, args[1]);
  bool same = false;
  Activation act = Activation::none;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "same" || args[i] == "valid") same = args[i] == "same";
    else act = activation(call, args[i]);
  }
  if (act == Activation::softmax) throw UsageError("model spec: conv2d cannot end in softmax");
  if (!same && (call.in.h < k || call.in.w < k))
    throw UsageError("model spec: conv2d(" + args[0] + "," + args[1] + ") does not fit its " +
                     std::to_string(call.in.h) + "x" + std::to_string(call.in.w) + " input");
  return std::make_unique<Conv2D>(call, filters, k, same, act);
}

}  // namespace pitrain
