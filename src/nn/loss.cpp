#include <algorithm>
#include <cmath>

#include "pitrain/model.h"

namespace pitrain {

LossStats softmax_cross_entropy(const float* logits, const int32_t* labels, int n, int classes,
                                float* dlogits, float grad_scale) {
  LossStats st;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + int64_t(i) * classes;
    const float zmax = *std::max_element(z, z + classes);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c] - zmax));
    const int32_t y = labels[i];
    st.loss_sum += std::log(sum) - double(z[y] - zmax);  // -log softmax(z)[y]
    st.correct += (std::max_element(z, z + classes) - z) == y;
    if (dlogits) {
      float* d = dlogits + int64_t(i) * classes;
      for (int c = 0; c < classes; ++c)
        d[c] = float(std::exp(double(z[c] - zmax)) / sum - (c == y ? 1.0 : 0.0)) * grad_scale;
    }
  }
  return st;
}

void softmax_rows(float* logits, int n, int classes) {
  for (int i = 0; i < n; ++i) {
    float* z = logits + int64_t(i) * classes;
    const float zmax = *std::max_element(z, z + classes);
    float sum = 0;
    for (int c = 0; c < classes; ++c) sum += (z[c] = std::exp(z[c] - zmax));
    for (int c = 0; c < classes; ++c) z[c] /= sum;
  }
}

}  // namespace pitrain
