// Direct convolution: each output pixel's F sums over its k*k*Cin taps, held in registers from
// the bias on, through the activation, and written once. Backward takes dy through the
// activation and sums dbias in one pass over an output row, then each tap's kernel gradient over
// the row in registers. For shallow inputs: a first layer's 3x3 taps of one channel are patches
// too short for a GEMM to pay, and im2col spends more there on its patch matrix, on packing it,
// on clearing its output and on a pass of its own for the bias and ReLU than on the
// multiplications (bench/compute.sh). Followed by a 2x2 max pool, it pools its output two rows
// at a time from a scratch in cache (fuse_pool): unfused, `cnn`'s first layer writes 4x the
// pooled output to memory, and reads it back twice in backward.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "pitrain/conv.h"
#include "pitrain/maxpool.h"
#include "pitrain/lanes.h"
#include "pitrain/vector_copies.h"

namespace pitrain {
namespace {

// A block of filters is V values of L: Lanes, or float for the filters past the last eight.
template <class L, int V>
inline void load(L (&v)[V], const float* p) {
  for (int l = 0; l < V; ++l) v[l] = lanes_at<L>(p + l * kWidth<L>);
}
template <class L, int V>
inline void store(float* p, const L (&v)[V]) {
  for (int l = 0; l < V; ++l) lanes_at<L>(p + l * kWidth<L>) = v[l];
}
template <class L, int V>
inline void add_to(float* p, const L (&v)[V]) {
  for (int l = 0; l < V; ++l) lanes_at<L>(p + l * kWidth<L>) += v[l];
}
// ReLU as add_bias has it: a NaN stays a NaN.
inline void relu_of(float& a) { a = a < 0 ? 0.0f : a; }
inline void relu_of(Lanes& a) { a = a < 0 ? Lanes{} : a; }

// Where an output pixel's taps are. Tap t = (i * k + j) * Cin + c is row t of the kernel as a
// (k*k*Cin, F) matrix. When all of a pixel's taps fall inside the image, tap t reads the input
// at offset[t] from its first tap (i = j = c = 0); a pixel on the padding reads, kernel row by
// kernel row, the run of taps inside, whose inputs are contiguous (run[t] = t).
struct Geometry {
  Shape in, out;
  int k, pad_top, pad_left;
  std::vector<int64_t> offset, run;  // (k*k*Cin), (k*Cin)

  Geometry(Shape in_, Shape out_, int k_, int pad_top_, int pad_left_)
      : in(in_), out(out_), k(k_), pad_top(pad_top_), pad_left(pad_left_) {
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j)
        for (int c = 0; c < in.c; ++c) offset.push_back((int64_t(i) * in.w + j) * in.c + c);
    for (int t = 0; t < k * in.c; ++t) run.push_back(t);
  }
  int depth() const { return int(offset.size()); }
  // Kernel rows [row_begin, row_end) and columns [col_begin, col_end) of output pixel (oh, ow)
  // that fall inside the image.
  int row_begin(int oh) const { return std::max(0, pad_top - oh); }
  int row_end(int oh) const { return std::min(k, in.h + pad_top - oh); }
  int col_begin(int ow) const { return std::max(0, pad_left - ow); }
  int col_end(int ow) const { return std::min(k, in.w + pad_left - ow); }
  bool inside(int oh, int ow) const {
    return row_begin(oh) == 0 && row_end(oh) == k && col_begin(ow) == 0 && col_end(ow) == k;
  }
  // The input under tap (i, j, 0) of output pixel (s, oh, ow).
  int64_t input_at(int s, int oh, int ow, int i, int j) const {
    return ((int64_t(s) * in.h + oh + i - pad_top) * in.w + ow + j - pad_left) * in.c;
  }
  int64_t output_at(int s, int oh, int ow) const {
    return ((int64_t(s) * out.h + oh) * out.w + ow) * out.c;
  }
  // Calls taps(at, offsets, count, t) for the taps of output pixel (s, oh, ow) inside the image:
  // count of them from kernel row t on, tap t + u reading the input at at + offsets[u].
  template <class Taps>
  __attribute__((always_inline)) void for_each_run(int s, int oh, int ow, Taps taps) const {
    if (inside(oh, ow)) return taps(input_at(s, oh, ow, 0, 0), offset.data(), depth(), 0);
    const int j0 = col_begin(ow), count = (col_end(ow) - j0) * in.c;
    for (int i = row_begin(oh); i < row_end(oh); ++i)
      if (count > 0) taps(input_at(s, oh, ow, i, j0), run.data(), count, (i * k + j0) * in.c);
  }
};

// acc += x[offsets[u]] w_u for `count` taps, w_u the kernel rows from w on, F apart.
template <class L, int V>
inline __attribute__((always_inline)) void add_taps(L (&acc)[V], const float* x,
                                                    const int64_t* offsets, int count,
                                                    const float* w, int F) {
  for (int u = 0; u < count; ++u, w += F) {
    const float v = x[offsets[u]];
    for (int l = 0; l < V; ++l) acc[l] += v * lanes_at<L>(w + l * kWidth<L>);
  }
}

// Filters [f0, f0 + V L) of output row (s, oh) of y = act(conv(x) + bias), y_row the row's
// first pixel. A pixel whose taps all fall inside the image keeps its sums in registers; one on
// the padding (its sums in a lambda's reach) goes kernel row by kernel row.
template <class L, int V>
inline __attribute__((always_inline)) void forward_block(const Geometry& g, const float* x,
                                                         const float* kernel, const float* bias,
                                                         bool relu, float* y_row, int s, int oh,
                                                         int f0) {
  const int F = g.out.c;
  auto finish = [&](L(&acc)[V], float* out) PITRAIN_INLINE_LAMBDA {
    if (relu)
      for (auto& a : acc) relu_of(a);
    store(out, acc);
  };
  for (int ow = 0; ow < g.out.w; ++ow) {
    float* out = y_row + int64_t(ow) * F + f0;
    if (g.inside(oh, ow)) {
      L acc[V];
      load(acc, bias + f0);
      add_taps(acc, x + g.input_at(s, oh, ow, 0, 0), g.offset.data(), g.depth(), kernel + f0, F);
      finish(acc, out);
      continue;
    }
    L border[V];
    load(border, bias + f0);
    g.for_each_run(s, oh, ow,
                   [&](int64_t at, const int64_t* offsets, int count, int t) PITRAIN_INLINE_LAMBDA {
                     add_taps(border, x + at, offsets, count, kernel + int64_t(t) * F + f0, F);
                   });
    finish(border, out);
  }
}

// Filters [f0, f0 + V L) of output row (s, oh), dy_row its gradient: through the activation (y_row
// the row's output, read only with relu), in place; added to dbias, dkernel and, unless null, dx.
// The row's pixels whose taps all fall inside the image add to a tap's kernel gradient in
// registers, the row's dy staying in cache.
template <class L, int V>
inline __attribute__((always_inline)) void backward_block(const Geometry& g, const float* x,
                                                          const float* y_row, float* dy_row,
                                                          const float* kernel, bool relu,
                                                          float* dkernel, float* dbias, float* dx,
                                                          int s, int oh, int f0) {
  const int F = g.out.c, C = g.in.c;
  // Output columns whose taps all fall inside the image, on rows that do.
  const int first = std::min(g.pad_left, g.out.w),
            last = std::max(first, std::min(g.out.w, g.in.w + g.pad_left - g.k + 1));
  float* dy = dy_row + f0;
  L db[V];
  load(db, dbias + f0);
  for (int ow = 0; ow < g.out.w; ++ow) {
    L d[V], out[V];
    load(d, dy + int64_t(ow) * F);
    if (relu) {
      load(out, y_row + f0 + int64_t(ow) * F);
      for (int l = 0; l < V; ++l) d[l] = out[l] > 0 ? d[l] : L{};
      store(dy + int64_t(ow) * F, d);
    }
    for (int l = 0; l < V; ++l) db[l] += d[l];
  }
  store(dbias + f0, db);
  const bool inner_row = g.row_begin(oh) == 0 && g.row_end(oh) == g.k;
  for (int t = 0; inner_row && t < g.depth() && first < last; ++t) {
    L acc[V] = {};
    const float* in = x + g.input_at(s, oh, first, 0, 0) + g.offset[size_t(t)];
    for (int ow = first; ow < last; ++ow, in += C) {
      L d[V];
      load(d, dy + int64_t(ow) * F);
      for (int l = 0; l < V; ++l) acc[l] += *in * d[l];
    }
    add_to(dkernel + int64_t(t) * F + f0, acc);
  }
  for (int ow = 0; ow < g.out.w; ++ow) {
    const bool inner = inner_row && ow >= first && ow < last;
    if (inner && !dx) continue;
    L d[V];
    load(d, dy + int64_t(ow) * F);
    g.for_each_run(s, oh, ow,
                   [&](int64_t at, const int64_t* offsets, int count, int t) PITRAIN_INLINE_LAMBDA {
                     for (int u = 0; u < count; ++u) {
                       const int64_t tap = int64_t(t + u) * F + f0;
                       if (!inner) {
                         L dw[V];
                         for (int l = 0; l < V; ++l) dw[l] = x[at + offsets[u]] * d[l];
                         add_to(dkernel + tap, dw);
                       }
                       if (!dx) continue;
                       L w[V];
                       load(w, kernel + tap);
                       L dot = w[0] * d[0];
                       for (int l = 1; l < V; ++l) dot += w[l] * d[l];
                       for (int l = 0; l < kWidth<L>; ++l)
                         dx[at + offsets[u]] += reinterpret_cast<const float*>(&dot)[l];
                     }
                   });
  }
}

// Calls block(L(), V, f0) for the blocks of F filters: 32 at a time (four vectors), then 8,
// then one.
template <class Block>
inline __attribute__((always_inline)) void for_each_block(int F, Block block) {
  int f0 = 0;
  for (; f0 + 32 <= F; f0 += 32) block(Lanes{}, std::integral_constant<int, 4>(), f0);
  for (; f0 + 8 <= F; f0 += 8) block(Lanes{}, std::integral_constant<int, 1>(), f0);
  for (; f0 < F; ++f0) block(0.0f, std::integral_constant<int, 1>(), f0);
}

// Output row (s, oh), every filter.
inline __attribute__((always_inline)) void forward_row(const Geometry& g, const float* x,
                                                       const float* kernel, const float* bias,
                                                       bool relu, float* y_row, int s, int oh) {
  for_each_block(g.out.c, [&](auto lane, auto vectors, int f0) PITRAIN_INLINE_LAMBDA {
    forward_block<decltype(lane), vectors()>(g, x, kernel, bias, relu, y_row, s, oh, f0);
  });
}

inline __attribute__((always_inline)) void backward_row(const Geometry& g, const float* x,
                                                        const float* y_row, float* dy_row,
                                                        const float* kernel, bool relu,
                                                        float* dkernel, float* dbias, float* dx,
                                                        int s, int oh) {
  for_each_block(g.out.c, [&](auto lane, auto vectors, int f0) PITRAIN_INLINE_LAMBDA {
    backward_block<decltype(lane), vectors()>(g, x, y_row, dy_row, kernel, relu, dkernel, dbias, dx,
                                              s, oh, f0);
  });
}

// The gradients that backward adds to, cleared.
void clear_gradients(const Geometry& g, float* dkernel, float* dbias, float* dx, int n) {
  std::fill_n(dkernel, int64_t(g.depth()) * g.out.c, 0.0f);
  std::fill_n(dbias, g.out.c, 0.0f);
  if (dx) std::fill_n(dx, int64_t(n) * g.in.size(), 0.0f);
}

PITRAIN_VECTOR_COPIES
void direct_forward(const Geometry& g, const float* x, const float* kernel, const float* bias,
                    bool relu, float* y, int n) {
  for (int s = 0; s < n; ++s)
    for (int oh = 0; oh < g.out.h; ++oh)
      forward_row(g, x, kernel, bias, relu, y + g.output_at(s, oh, 0), s, oh);
}

PITRAIN_VECTOR_COPIES
void direct_backward(const Geometry& g, const float* x, const float* y, float* dy,
                     const float* kernel, bool relu, float* dkernel, float* dbias, float* dx,
                     int n) {
  clear_gradients(g, dkernel, dbias, dx, n);
  for (int s = 0; s < n; ++s)
    for (int oh = 0; oh < g.out.h; ++oh) {
      const int64_t row = g.output_at(s, oh, 0);
      backward_row(g, x, y + row, dy + row, kernel, relu, dkernel, dbias, dx, s, oh);
    }
}

// With the 2x2 max pool: the two output rows under each pooled row go to `rows` (2, Wo, F), a
// scratch that stays in cache, and are pooled from there; pooled row (s, ph) of y and argmax
// (n, Ho/2, Wo/2, F) starts at start(s, ph). An odd last output row is never made.
struct PooledRows {
  Shape two;       // the scratch's rows
  int height;      // pooled rows an image, Ho/2
  int64_t floats;  // a pooled row's, Wo/2 * F
  explicit PooledRows(const Geometry& g)
      : two{2, g.out.w, g.out.c}, height(g.out.h / 2), floats(int64_t(g.out.w / 2) * g.out.c) {}
  int64_t start(int s, int ph) const { return (int64_t(s) * height + ph) * floats; }
};

PITRAIN_VECTOR_COPIES
void direct_pool_forward(const Geometry& g, const float* x, const float* kernel, const float* bias,
                         bool relu, float* rows, float* y, uint8_t* argmax, int n) {
  const PooledRows p(g);
  for (int s = 0; s < n; ++s)
    for (int ph = 0; ph < p.height; ++ph) {
      for (int r = 0; r < 2; ++r)
        forward_row(g, x, kernel, bias, relu, rows + r * p.two.w * p.two.c, s, 2 * ph + r);
      maxpool_forward(rows, y + p.start(s, ph), argmax + p.start(s, ph), 1, p.two);
    }
}

// dy (n, Ho/2, Wo/2, F) at the pooled y: through the activation there (the maximum is the pixel
// that gets the gradient, so its mask is the pooled value's), in place, then to the two output
// rows under each pooled row in `rows`, and back from them as direct_backward does, in the same
// order: the same bits as the convolution and the pool apart.
PITRAIN_VECTOR_COPIES
void direct_pool_backward(const Geometry& g, const float* x, const float* y, float* dy,
                          const float* kernel, bool relu, float* rows, const uint8_t* argmax,
                          float* dkernel, float* dbias, float* dx, int n) {
  clear_gradients(g, dkernel, dbias, dx, n);
  const PooledRows p(g);
  if (relu)
    for (int64_t i = 0, pooled = p.start(n, 0); i < pooled; ++i) dy[i] = y[i] > 0 ? dy[i] : 0.0f;
  for (int s = 0; s < n; ++s)
    for (int ph = 0; ph < p.height; ++ph) {
      maxpool_backward(dy + p.start(s, ph), argmax + p.start(s, ph), rows, 1, p.two);
      for (int r = 0; r < 2; ++r)
        backward_row(g, x, nullptr, rows + r * p.two.w * p.two.c, kernel, false, dkernel, dbias, dx,
                     s, 2 * ph + r);
    }
}

class DirectConv : public ConvAlgorithm {
 public:
  DirectConv(Shape in, Shape out, int k, int pad_top, int pad_left, Activation act)
      : g_(in, out, k, pad_top, pad_left), relu_(act == Activation::relu) {}

  bool fuse_pool() override {
    pools_ = true;
    rows_.resize(size_t(2) * g_.out.w * g_.out.c);
    return true;
  }

  void reserve(int batch) override {
    if (pools_) argmax_.resize(size_t(batch) * (g_.out.h / 2) * (g_.out.w / 2) * g_.out.c);
  }

  void forward(const float* x, const float* kernel, const float* bias, const float*, float* y,
               int n) override {
    if (pools_)
      direct_pool_forward(g_, x, kernel, bias, relu_, rows_.data(), y, argmax_.data(), n);
    else
      direct_forward(g_, x, kernel, bias, relu_, y, n);
  }

  void backward(const float* x, const float* y, float* dy, const float* kernel, const float*,
                float* dkernel, float* dbias, float* dx, int n) override {
    if (pools_)
      direct_pool_backward(g_, x, y, dy, kernel, relu_, rows_.data(), argmax_.data(), dkernel,
                           dbias, dx, n);
    else
      direct_backward(g_, x, y, dy, kernel, relu_, dkernel, dbias, dx, n);
  }

 private:
  Geometry g_;
  bool relu_;
  bool pools_ = false;           // fuse_pool: forward pools, backward takes the pooled gradient
  std::vector<float> rows_;      // (2, Wo, F): two output rows on their way to the pool
  std::vector<uint8_t> argmax_;  // (n, Ho/2, Wo/2, F): which of each window's taps won
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_direct_conv(Shape in, Shape out, int k, int pad_top,
                                                int pad_left, Activation act) {
  return std::make_unique<DirectConv>(in, out, k, pad_top, pad_left, act);
}

}  // namespace pitrain
