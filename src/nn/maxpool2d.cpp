// MaxPool2D 2x2, stride 2, Keras 'valid': an odd last row or column is dropped.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "pitrain/error.h"
#include "pitrain/layer_registry.h"
#include "pitrain/maxpool.h"
#include "pitrain/lanes.h"
#include "pitrain/vector_copies.h"

namespace pitrain {
namespace {

class MaxPool2D : public Layer {
 public:
  explicit MaxPool2D(const LayerCall& call) : Layer(call) {}
  Shape output_shape() const override { return {in_.h / 2, in_.w / 2, in_.c}; }
  void reserve(int batch) override { argmax_.resize(size_t(batch) * output_shape().size()); }
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;

  void keras_config(nlohmann::ordered_json& config) const override {
    config["pool_size"] = {2, 2};
    config["padding"] = "valid";
    config["strides"] = {2, 2};
    config["data_format"] = "channels_last";
  }

 private:
  std::vector<uint8_t> argmax_;  // (n, out): which of the window's 4 taps held the maximum
};

// Which taps, eight channels' worth: as Lanes' comparisons give them, and as argmax keeps them.
using LaneInts = int32_t __attribute__((vector_size(32)));
using LaneBytes = uint8_t __attribute__((vector_size(8)));

// A float's bits, allowed to alias floats (GCC and Clang's may_alias).
typedef uint32_t __attribute__((may_alias)) FloatBits;

}  // namespace

// Each output pixel looks at the (2x2) window's four taps; channels are contiguous, so the
// inner loops run over C floats of four input pixels at once.
PITRAIN_VECTOR_COPIES
void maxpool_forward(const float* x, float* y, uint8_t* arg, int n, Shape in) {
  const Shape o{in.h / 2, in.w / 2, in.c};
  const int c = in.c;
  const int64_t row = int64_t(in.w) * c;
  for (int s = 0; s < n; ++s)
    for (int oh = 0; oh < o.h; ++oh)
      for (int ow = 0; ow < o.w; ++ow, y += c, arg += c) {
        const float* __restrict t0 = x + (int64_t(s) * in.h + 2 * oh) * row + int64_t(2 * ow) * c;
        const float* __restrict t1 = t0 + c;
        const float* __restrict t2 = t0 + row;
        const float* __restrict t3 = t2 + c;
        float* __restrict out = y;
        uint8_t* __restrict which = arg;
        int ch = 0;
        // As below, in selects, not branches.
        for (; ch + kWidth<Lanes> <= c; ch += kWidth<Lanes>) {
          Lanes best = lanes_at<Lanes>(t0 + ch);
          LaneInts w = {};
          const float* taps[] = {t1, t2, t3};
          for (int k = 0; k < 3; ++k) {
            const Lanes v = lanes_at<Lanes>(taps[k] + ch);
            const LaneInts more = v > best;
            best = more ? v : best;
            w = more ? LaneInts{} + (k + 1) : w;
          }
          lanes_at<Lanes>(out + ch) = best;
          const LaneBytes won = __builtin_convertvector(w, LaneBytes);
          std::memcpy(which + ch, &won, sizeof won);
        }
        for (; ch < c; ++ch) {
          float best = t0[ch];
          uint8_t w = 0;
          if (t1[ch] > best) best = t1[ch], w = 1;
          if (t2[ch] > best) best = t2[ch], w = 2;
          if (t3[ch] > best) best = t3[ch], w = 3;
          out[ch] = best;
          which[ch] = w;
        }
      }
}

void MaxPool2D::forward(const float* x, float* y, int n, const Context&) {
  maxpool_forward(x, y, argmax_.data(), n, in_);
}

// Writes every input gradient once, in memory order: dy at each window's maximum, 0 elsewhere
// and on an odd last row or column, which the pooling dropped.
PITRAIN_VECTOR_COPIES
void maxpool_backward(const float* dy, const uint8_t* argmax, float* dx, int n, Shape in) {
  const Shape o{in.h / 2, in.w / 2, in.c};
  const int c = in.c;
  for (int s = 0; s < n; ++s)
    for (int ih = 0; ih < in.h; ++ih)
      for (int iw = 0; iw < in.w; ++iw, dx += c) {
        const int oh = ih / 2, ow = iw / 2;
        if (oh >= o.h || ow >= o.w) {
          std::fill_n(dx, c, 0.0f);
          continue;
        }
        const int64_t at = ((int64_t(s) * o.h + oh) * o.w + ow) * c;
        const FloatBits* __restrict grad = reinterpret_cast<const FloatBits*>(dy + at);
        const uint8_t* __restrict which = argmax + at;
        FloatBits* __restrict out = reinterpret_cast<FloatBits*>(dx);
        const uint8_t tap = uint8_t((ih % 2) * 2 + iw % 2);
        // Masks the float's bits instead of branching: which tap won is a coin toss, and
        // mispredicted branches would be a hot spot of the step. The compiler vectorises this
        // loop itself (in Lanes, widening the argmax bytes takes longer).
        for (int ch = 0; ch < c; ++ch) out[ch] = grad[ch] & (0u - uint32_t(which[ch] == tap));
      }
}

void MaxPool2D::backward(const float*, const float*, float* dy, float* dx, int n) {
  if (dx) maxpool_backward(dy, argmax_.data(), dx, n, in_);
}

std::unique_ptr<Layer> make_maxpool2d(const LayerCall& call) {
  expect_args(call, 0, 0);
  if (call.in.h < 2 || call.in.w < 2)
    throw UsageError("model spec: maxpool2d needs an input of at least 2x2");
  return std::make_unique<MaxPool2D>(call);
}

}  // namespace pitrain
