// Convolution as im2col + one GEMM a pass: (n*Ho*Wo, k*k*Cin) x (k*k*Cin, F), the bias and
// activation in a pass of their own. The kernel flattened row-major is exactly the GEMM's right
// side.
#include <algorithm>

#include "pitrain/conv.h"
#include "pitrain/matrix.h"

namespace pitrain {
namespace {

// Walks every (output pixel, kernel row) pair of the im2col matrix. A kernel row spans k taps
// that are contiguous in NHWC memory (k*Cin floats), so the part inside the image is one run:
// visit(patch, image, count) for it, pad(patch, count) for the parts in the zero padding.
template <class Image, class Visit, class Pad>
void for_each_patch_row(Shape in, Shape out, int k, int pad_top, int pad_left, int n, float* col,
                        Image* image, Visit visit, Pad pad) {
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
          // Taps inside the image.
          const int first = std::max(0, -iw), last = std::min(k, in.w - iw);
          if (first > 0) pad(patch, first * cin);
          visit(patch + first * cin, image + ((int64_t(s) * in.h + ih) * in.w + iw + first) * cin,
                (last - first) * cin);
          if (last < k) pad(patch + last * cin, (k - last) * cin);
        }
}

class Im2colConv : public ConvAlgorithm {
 public:
  Im2colConv(Shape in, Shape out, int k, int pad_top, int pad_left, Activation act)
      : in_(in), out_(out), k_(k), pad_top_(pad_top), pad_left_(pad_left), act_(act) {}

  void reserve(int batch) override {
    col_.resize(size_t(batch) * out_.h * out_.w * k_ * k_ * in_.c);
  }

  void forward(const float* x, const float* kernel, const float* bias, const float*, float* y,
               int n) override {
    for_each_patch_row(
        in_, out_, k_, pad_top_, pad_left_, n, col_.data(), x,
        [](float* __restrict patch, const float* __restrict img, int count) {
          // A run is k * Cin floats, 3 for a first layer: a plain loop, not a memmove call.
          for (int c = 0; c < count; ++c) patch[c] = img[c];
        },
        [](float* patch, int count) { std::fill_n(patch, count, 0.0f); });
    gemm(false, false, n * out_.h * out_.w, out_.c, k_ * k_ * in_.c, col_.data(), kernel, y);
    add_bias(y, n * out_.h * out_.w, out_.c, bias, act_);
  }

  void backward(const float*, const float* y, float* dy, const float* kernel, const float*,
                float* dkernel, float* dbias, float* dx, int n) override {
    const int rows = n * out_.h * out_.w, depth = k_ * k_ * in_.c;
    bias_backward(y, dy, rows, out_.c, dbias, act_);
    gemm(true, false, depth, out_.c, rows, col_.data(), dy, dkernel);  // dW = col^T dY
    if (!dx) return;
    // The patches are spent: d(col) = dY W^T.
    gemm(false, true, rows, depth, out_.c, dy, kernel, col_.data());
    std::fill_n(dx, int64_t(n) * in_.size(), 0.0f);
    for_each_patch_row(
        in_, out_, k_, pad_top_, pad_left_, n, col_.data(), dx,
        [](const float* patch, float* img, int count) {
          for (int c = 0; c < count; ++c) img[c] += patch[c];
        },
        [](float*, int) {});
  }

 private:
  Shape in_, out_;
  int k_, pad_top_, pad_left_;
  Activation act_;
  std::vector<float> col_;  // (n*Ho*Wo, k*k*Cin): the patches of the last forward
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_im2col_conv(Shape in, Shape out, int k, int pad_top,
                                                int pad_left, Activation act) {
  return std::make_unique<Im2colConv>(in, out, k, pad_top, pad_left, act);
}

std::unique_ptr<ConvAlgorithm> make_conv_algorithm(Shape in, Shape out, int k, int pad_top,
                                                   int pad_left, Activation act) {
  if (k * k * in.c <= kDirectMaxDepth) return make_direct_conv(in, out, k, pad_top, pad_left, act);
  if (k == 3 && in.c >= kWinogradMinChannels)
    return make_winograd_conv(in, out, pad_top, pad_left, winograd_tile(out), act);
  return make_im2col_conv(in, out, k, pad_top, pad_left, act);
}

}  // namespace pitrain
