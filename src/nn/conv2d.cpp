// Conv2D as im2col + one GEMM per batch: (n*Ho*Wo, k*k*Cin) x (k*k*Cin, F). The kernel's
// (kh, kw, Cin, F) layout is Keras', and flattened row-major it is exactly the GEMM's right side.
#include <algorithm>

#include "pitrain/layers.h"
#include "pitrain/matrix.h"

namespace pitrain {

Conv2D::Conv2D(Shape in, int filters, int k, bool same, Activation act)
    : Layer(in), filters_(filters), k_(k), pad_top_(same ? (k - 1) / 2 : 0), pad_left_(pad_top_), same_(same), act_(act) {}

std::string Conv2D::describe() const {
  return "conv2d(" + std::to_string(filters_) + "," + std::to_string(k_) + (same_ ? ",same" : "") +
         (act_ == Activation::relu ? ",relu" : "") + ")";
}

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

namespace {

// Walks every (output pixel, kernel tap) pair: visit(patch, image) for taps inside the image,
// pad(patch) for taps in the zero padding. Patch and image point at Cin contiguous floats.
template <class Image, class Visit, class Pad>
void for_each_tap(Shape in, Shape out, int k, int pad_top, int pad_left, int n, float* col, Image* image,
                  Visit visit, Pad pad) {
  const int cin = in.c;
  for (int s = 0; s < n; ++s)
    for (int oh = 0; oh < out.h; ++oh)
      for (int ow = 0; ow < out.w; ++ow) {
        float* patch = col + ((int64_t(s) * out.h + oh) * out.w + ow) * k * k * cin;
        for (int i = 0; i < k; ++i) {
          const int ih = oh + i - pad_top;
          for (int j = 0; j < k; ++j, patch += cin) {
            const int iw = ow + j - pad_left;
            if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w)
              pad(patch);
            else
              visit(patch, image + ((int64_t(s) * in.h + ih) * in.w + iw) * cin);
          }
        }
      }
}

}  // namespace

void Conv2D::forward(const float* x, float* y, int n, const Context&) {
  const Shape o = output_shape();
  const int cin = in_.c;
  for_each_tap(in_, o, k_, pad_top_, pad_left_, n, col_.data(), x,
               [cin](float* patch, const float* img) { std::copy_n(img, cin, patch); },
               [cin](float* patch) { std::fill_n(patch, cin, 0.0f); });
  const int64_t rows = int64_t(n) * o.h * o.w, depth = int64_t(k_) * k_ * cin;
  ConstMatrixView col(col_.data(), rows, depth), kernel(w_, depth, filters_);
  MatrixView out(y, rows, filters_);
  out.noalias() = col * kernel;
  out.rowwise() += ConstVectorView(w_ + depth * filters_, filters_);
  if (act_ == Activation::relu) relu_forward(y, rows * filters_);
}

void Conv2D::backward(const float*, const float* y, float* dy, float* dx, int n) {
  const Shape o = output_shape();
  const int64_t rows = int64_t(n) * o.h * o.w, depth = int64_t(k_) * k_ * in_.c;
  if (act_ == Activation::relu) relu_backward(y, dy, rows * filters_);
  ConstMatrixView grad_out(dy, rows, filters_), kernel(w_, depth, filters_);
  MatrixView col(col_.data(), rows, depth);
  MatrixView(dw_, depth, filters_).noalias() = col.transpose() * grad_out;
  VectorView(dw_ + depth * filters_, filters_) = grad_out.colwise().sum();
  if (!dx) return;
  col.noalias() = grad_out * kernel.transpose();  // the patches are spent: reuse them for d(col)
  const int cin = in_.c;
  std::fill_n(dx, int64_t(n) * in_.size(), 0.0f);
  for_each_tap(in_, o, k_, pad_top_, pad_left_, n, col_.data(), dx,
               [cin](float* patch, float* img) {
                 for (int c = 0; c < cin; ++c) img[c] += patch[c];
               },
               [](float*) {});
}

}  // namespace pitrain
