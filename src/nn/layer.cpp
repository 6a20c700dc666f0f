// The Layer base and the helpers its subclasses share: parameter counts, spec text, the fused
// bias + activation of Dense and Conv2D, Keras' kernel initialiser.
#include <algorithm>
#include <cmath>

#include "pitrain/layer_registry.h"
#include "pitrain/rng.h"
#include "pitrain/vector_copies.h"

namespace pitrain {

Layer::Layer(const LayerCall& call) : in_(call.in), type_(&call.type) {}

std::string Layer::spec() const { return spec_text(*type_, spec_args()); }

int64_t ParamView::size() const {
  int64_t s = 1;
  for (auto d : shape) s *= d;
  return s;
}

int64_t Layer::num_params() const {
  int64_t s = 0;
  for (auto& p : params()) s += p.size();
  return s;
}

PITRAIN_VECTOR_COPIES
void add_bias(float* __restrict y, int rows, int cols, const float* __restrict bias,
              Activation act) {
  for (int r = 0; r < rows; ++r, y += cols)
    if (act == Activation::relu)
      for (int c = 0; c < cols; ++c) y[c] = std::max(y[c] + bias[c], 0.0f);
    else
      for (int c = 0; c < cols; ++c) y[c] += bias[c];
}

PITRAIN_VECTOR_COPIES
void bias_backward(const float* __restrict y, float* __restrict dy, int rows, int cols,
                   float* __restrict dbias, Activation act) {
  std::fill_n(dbias, cols, 0.0f);
  for (int r = 0; r < rows; ++r, y += cols, dy += cols) {
    if (act == Activation::relu)
      for (int c = 0; c < cols; ++c) dy[c] = y[c] > 0.0f ? dy[c] : 0.0f;
    for (int c = 0; c < cols; ++c) dbias[c] += dy[c];
  }
}

void glorot_uniform(float* w, int64_t count, int64_t fan_in, int64_t fan_out, uint64_t key) {
  const float limit = std::sqrt(6.0f / float(fan_in + fan_out));
  for (int64_t i = 0; i < count; ++i) w[i] = (2.0f * uniform01(key, uint64_t(i)) - 1.0f) * limit;
}

}  // namespace pitrain
