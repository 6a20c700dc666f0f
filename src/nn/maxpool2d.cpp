// MaxPool2D 2x2, stride 2, Keras 'valid': an odd last row or column is dropped.
#include <algorithm>

#include "pitrain/layers.h"

namespace pitrain {

MaxPool2D::MaxPool2D(Shape in) : Layer(in) {}

void MaxPool2D::reserve(int batch) { argmax_.resize(size_t(batch) * output_shape().size()); }

void MaxPool2D::forward(const float* x, float* y, int n, const Context&) {
  const Shape o = output_shape();
  const int c = in_.c;
  int32_t* arg = argmax_.data();
  for (int s = 0; s < n; ++s) {
    const float* img = x + int64_t(s) * in_.size();
    for (int oh = 0; oh < o.h; ++oh)
      for (int ow = 0; ow < o.w; ++ow)
        for (int ch = 0; ch < c; ++ch, ++y, ++arg) {
          const int32_t taps[4] = {((2 * oh) * in_.w + 2 * ow) * c + ch, ((2 * oh) * in_.w + 2 * ow + 1) * c + ch,
                                   ((2 * oh + 1) * in_.w + 2 * ow) * c + ch,
                                   ((2 * oh + 1) * in_.w + 2 * ow + 1) * c + ch};
          int32_t best = taps[0];
          for (int t = 1; t < 4; ++t)
            if (img[taps[t]] > img[best]) best = taps[t];
          *y = img[best];
          *arg = best;
        }
  }
}

void MaxPool2D::backward(const float*, const float*, float* dy, float* dx, int n) {
  if (!dx) return;
  const int64_t in_size = in_.size(), out_size = output_shape().size();
  std::fill_n(dx, n * in_size, 0.0f);
  for (int s = 0; s < n; ++s)
    for (int64_t i = 0; i < out_size; ++i)  // windows do not overlap: each input gets one gradient at most
      dx[s * in_size + argmax_[size_t(s * out_size + i)]] = dy[s * out_size + i];
}

}  // namespace pitrain
