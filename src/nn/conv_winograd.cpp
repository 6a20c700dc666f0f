// Winograd F(m x m, 3x3) (Lavin and Gray, 2016): an m x m output tile is A^T [(G g G^T) . (B^T d
// B)] A for the a x a input tile d (a = m + 2) and the 3x3 kernel g. In the transformed space the
// a^2 positions xi are independent: M_xi (tiles, F) = V_xi (tiles, Cin) x U_xi (Cin, F), a^2 GEMMs
// of 9 m^2 / a^2 times fewer multiplications than im2col's (2.25x for m = 2, 4x for m = 4), each
// too small for packing to pay (gemm_unpacked). Backward is the exact adjoint of that forward:
// dM = A dY A^T, dU_xi = V_xi^T dM_xi, dV_xi = dM_xi U_xi^T, then dg = G^T dU G and dd = B dV B^T.
// Every transform runs along the channels, which NHWC keeps contiguous, so its loops vectorise,
// in the CPU's vector width (vector_copies.h). U and U^T (which dV's products read as rows) are
// the layer's prepared weights (Layer::prepared_floats): made once a batch on each thread, not
// once a share, where they would be a noticeable part of a cnn step.
#include <algorithm>

#include "pitrain/conv.h"
#include "pitrain/matrix.h"
#include "pitrain/vector_copies.h"

namespace pitrain {
namespace {

// The transforms of F(2x2, 3x3) and F(4x4, 3x3), interpolation points 0, +-1 (and +-2), infinity
// (wincnn's). F(4x4) multiplies 1.8x less than F(2x2) but rounds more: in fp32 a tile's largest
// error is ~1.5e-6 of its mean output against F(2x2)'s ~2e-7 (median of random tiles).
struct F2x2 {
  static constexpr int m = 2, a = 4;
  static constexpr float BT[a][a] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float G[a][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float AT[m][a] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
struct F4x4 {
  static constexpr int m = 4, a = 6;
  static constexpr float BT[a][a] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0},
                                     {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
                                     {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float G[a][3] = {{1.0f / 4, 0, 0},
                                    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                    {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                    {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                    {0, 0, 1}};
  static constexpr float AT[m][a] = {
      {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// Every transform here is X -> P X P^T on a tile of pixels, done for a block of L channels at a
// time (NHWC keeps them contiguous): x(j1, j2) points at the block in input pixel (j1, j2), and
// y(i1, i2) at the block of output pixel (i1, i2) (Add: added into it). P (I x J) comes from the
// tables above: with the loops unrolled, every coefficient is a constant, zero terms drop out and
// +-1 terms are plain adds, and the lane loop is one vector operation.
constexpr int kLanes = 8;

template <int I, int J, int L, bool Add = false, class Coef, class In, class Out>
inline __attribute__((always_inline)) void sandwich(Coef p, In x, Out y) {
  float rows[J][I][L];  // X P^T
#pragma GCC unroll 8
  for (int j1 = 0; j1 < J; ++j1)
#pragma GCC unroll 8
    for (int i2 = 0; i2 < I; ++i2) {
      float* acc = rows[j1][i2];
      bool first = true;
#pragma GCC unroll 8
      for (int j2 = 0; j2 < J; ++j2) {
        const float c = p(i2, j2);
        if (c == 0) continue;
        const float* in = x(j1, j2);
        for (int l = 0; l < L; ++l) acc[l] = first ? c * in[l] : acc[l] + c * in[l];
        first = false;
      }
    }
#pragma GCC unroll 8
  for (int i1 = 0; i1 < I; ++i1)
#pragma GCC unroll 8
    for (int i2 = 0; i2 < I; ++i2) {
      float acc[L];
      bool first = true;
#pragma GCC unroll 8
      for (int j1 = 0; j1 < J; ++j1) {
        const float c = p(i1, j1);
        if (c == 0) continue;
        for (int l = 0; l < L; ++l)
          acc[l] = first ? c * rows[j1][i2][l] : acc[l] + c * rows[j1][i2][l];
        first = false;
      }
      float* out = y(i1, i2);
      for (int l = 0; l < L; ++l) out[l] = Add ? out[l] + acc[l] : acc[l];
    }
}

// sandwich over all n channels: blocks of kLanes, then the rest one at a time. x(j1, j2, c) and
// y(i1, i2, c) point at channel c of a pixel.
template <int I, int J, bool Add = false, class Coef, class In, class Out>
inline __attribute__((always_inline)) void sandwich_channels(int n, Coef p, In x, Out y) {
  int c = 0;
  for (; c + kLanes <= n; c += kLanes)
    sandwich<I, J, kLanes, Add>(
        p, [&](int j1, int j2) { return x(j1, j2, c); },
        [&](int i1, int i2) { return y(i1, i2, c); });
  for (; c < n; ++c)
    sandwich<I, J, 1, Add>(
        p, [&](int j1, int j2) { return x(j1, j2, c); },
        [&](int i1, int i2) { return y(i1, i2, c); });
}

// Floats from one position's matrix to the next for matrices of `floats`: an odd number of cache
// lines, so that a tile's a^2 values, one in each matrix, fall in different cache sets. Packed
// back to back, 8 rows of cnn's conv2 put the 36 of them 18 KB apart, all in two of the L1's sets.
int64_t position_stride(int64_t floats) {
  constexpr int64_t line = 16;
  return ((floats + line - 1) / line | 1) * line;
}

template <class T>
class WinogradConv : public ConvAlgorithm {
  static constexpr int m = T::m, a = T::a, positions = a * a;

 public:
  WinogradConv(Shape in, Shape out, int pad_top, int pad_left, Activation act)
      : in_(in),
        out_(out),
        pad_top_(pad_top),
        pad_left_(pad_left),
        act_(act),
        tiles_h_((out.h + m - 1) / m),
        tiles_w_((out.w + m - 1) / m),
        su_(position_stride(int64_t(in.c) * out.c)),
        du_(positions * size_t(su_)),
        zeros_(size_t(std::max(in.c, out.c)), 0.0f),
        discard_(zeros_.size()) {}

  void reserve(int batch) override {
    const size_t tiles = size_t(batch) * tiles_h_ * tiles_w_;
    v_.resize(positions * size_t(position_stride(int64_t(tiles) * in_.c)));
    m_.resize(positions * size_t(position_stride(int64_t(tiles) * out_.c)));
  }

  // U (a^2, Cin, F), then U^T (a^2, F, Cin) for dV's products, which read it as rows, then the
  // kernel transposed (3, 3, F, Cin), from which U^T is made as U is from the kernel. Forward
  // alone (validation) reads only U, but a thread's prepared weights serve its whole batch.
  int64_t prepared_floats() const override {
    return 2 * int64_t(du_.size()) + 9 * int64_t(in_.c) * out_.c;
  }
  void prepare(const float* kernel, float* u) const override {
    const int64_t C = in_.c, F = out_.c;
    float* ut = u + du_.size();
    float* kernel_t = ut + du_.size();
    transform_kernel(kernel, C, F, u);
    for (int64_t tap = 0; tap < 9; ++tap)
      MatrixView(kernel_t + tap * F * C, F, C) =
          ConstMatrixView(kernel + tap * C * F, C, F).transpose();
    transform_kernel(kernel_t, F, C, ut);
  }

  void forward(const float* x, const float*, const float* bias, const float* u, float* y,
               int n) override {
    const int64_t tiles = int64_t(n) * tiles_h_ * tiles_w_, C = in_.c, F = out_.c;
    const int64_t sv = position_stride(tiles * C), sm = position_stride(tiles * F);
    for (int64_t t = 0; t < tiles; ++t) transform_input_tile(x, t, sv);
    for (int xi = 0; xi < positions; ++xi)
      gemm_unpacked(int(tiles), int(F), int(C), &v_[size_t(xi * sv)], C, 1, u + xi * su_, F,
                    &m_[size_t(xi * sm)], F);
    for (int64_t t = 0; t < tiles; ++t) transform_output_tile(y, t, sm);
    add_bias(y, n * out_.h * out_.w, out_.c, bias, act_);
  }

  void backward(const float*, const float* y, float* dy, const float*, const float* u,
                float* dkernel, float* dbias, float* dx, int n) override {
    const int64_t tiles = int64_t(n) * tiles_h_ * tiles_w_, C = in_.c, F = out_.c;
    const int64_t sv = position_stride(tiles * C), sm = position_stride(tiles * F);
    bias_backward(y, dy, n * out_.h * out_.w, out_.c, dbias, act_);
    for (int64_t t = 0; t < tiles; ++t) output_tile_adjoint(dy, t, sm);  // dM into m_
    for (int xi = 0; xi < positions; ++xi)
      gemm_unpacked(int(C), int(F), int(tiles), &v_[size_t(xi * sv)], 1, C, &m_[size_t(xi * sm)], F,
                    &du_[size_t(xi * su_)], F);
    kernel_adjoint(dkernel);
    if (!dx) return;
    const float* ut = u + du_.size();
    for (int xi = 0; xi < positions; ++xi)  // V is spent: dV into v_
      gemm_unpacked(int(tiles), int(C), int(F), &m_[size_t(xi * sm)], F, 1, ut + xi * su_, C,
                    &v_[size_t(xi * sv)], C);
    std::fill_n(dx, int64_t(n) * in_.size(), 0.0f);
    for (int64_t t = 0; t < tiles; ++t) input_tile_adjoint(dx, t, sv);
  }

 private:
  // The a x a input pixels of tile t (image s, tile row ty, column tx): a pointer to each one's
  // channels, the zeros (read) or the discard buffer (written) where the tile leaves the image.
  template <class P>
  void input_taps(P* image, int64_t t, P* outside, P* taps[positions]) const {
    const int64_t s = t / (tiles_h_ * tiles_w_), ty = t / tiles_w_ % tiles_h_, tx = t % tiles_w_;
    for (int r = 0; r < a; ++r)
      for (int q = 0; q < a; ++q) {
        const int64_t ih = m * ty - pad_top_ + r, iw = m * tx - pad_left_ + q;
        const bool inside = ih >= 0 && ih < in_.h && iw >= 0 && iw < in_.w;
        taps[r * a + q] = inside ? image + ((s * in_.h + ih) * in_.w + iw) * in_.c : outside;
      }
  }

  // The m x m output pixels of tile t, likewise.
  template <class P>
  void output_taps(P* image, int64_t t, P* outside, P* taps[m * m]) const {
    const int64_t s = t / (tiles_h_ * tiles_w_), ty = t / tiles_w_ % tiles_h_, tx = t % tiles_w_;
    for (int p = 0; p < m; ++p)
      for (int q = 0; q < m; ++q) {
        const int64_t oh = m * ty + p, ow = m * tx + q;
        taps[p * m + q] = oh < out_.h && ow < out_.w
                              ? image + ((s * out_.h + oh) * out_.w + ow) * out_.c
                              : outside;
      }
  }

  // U = G g G^T for every pair of input channel and filter; kernel (3, 3, rows, cols), u (a^2,
  // rows, cols), su_ apart. rows, cols: Cin, F, or F, Cin for the transposed kernel. prepare's
  // body: a virtual function cannot have copies for several instruction sets.
  PITRAIN_VECTOR_COPIES
  void transform_kernel(const float* kernel, int64_t rows, int64_t cols, float* u) const {
    for (int64_t r = 0; r < rows; ++r)
      sandwich_channels<a, 3>(
          int(cols), [](int i, int j) { return T::G[i][j]; },
          [&](int i, int j, int q) { return kernel + ((i * 3 + j) * rows + r) * cols + q; },
          [&](int xa, int b, int q) { return u + (xa * a + b) * su_ + r * cols + q; });
  }

  // dg = G^T dU G, the adjoint of transform_kernel.
  PITRAIN_VECTOR_COPIES
  void kernel_adjoint(float* dkernel) {
    const int64_t C = in_.c, F = out_.c;
    for (int64_t c = 0; c < C; ++c)
      sandwich_channels<3, a>(
          int(F), [](int i, int j) { return T::G[j][i]; },
          [&](int xa, int b, int f) { return &du_[size_t((xa * a + b) * su_ + c * F + f)]; },
          [&](int i, int j, int f) { return dkernel + ((i * 3 + j) * C + c) * F + f; });
  }

  // V = B^T d B of tile t, every channel; v_ (a^2, tiles, Cin), positions sv floats apart.
  PITRAIN_VECTOR_COPIES
  void transform_input_tile(const float* x, int64_t t, int64_t sv) {
    const float* taps[positions];
    input_taps(x, t, zeros_.data(), taps);
    const int64_t C = in_.c;
    sandwich_channels<a, a>(
        int(C), [](int i, int j) { return T::BT[i][j]; },
        [&](int r, int q, int c) { return taps[r * a + q] + c; },
        [&](int xa, int b, int c) { return &v_[size_t((xa * a + b) * sv + t * C + c)]; });
  }

  // dd = B dV B^T of tile t, added into dx (tiles overlap by two pixels).
  PITRAIN_VECTOR_COPIES
  void input_tile_adjoint(float* dx, int64_t t, int64_t sv) {
    float* taps[positions];
    input_taps(dx, t, discard_.data(), taps);
    const int64_t C = in_.c;
    sandwich_channels<a, a, true>(
        int(C), [](int i, int j) { return T::BT[j][i]; },
        [&](int xa, int b, int c) -> const float* {
          return &v_[size_t((xa * a + b) * sv + t * C + c)];
        },
        [&](int r, int q, int c) { return taps[r * a + q] + c; });
  }

  // Y = A^T M A of tile t, every filter; m_ (a^2, tiles, F), positions sm floats apart.
  PITRAIN_VECTOR_COPIES
  void transform_output_tile(float* y, int64_t t, int64_t sm) {
    float* taps[m * m];
    output_taps(y, t, discard_.data(), taps);
    const int64_t F = out_.c;
    sandwich_channels<m, a>(
        int(F), [](int i, int j) { return T::AT[i][j]; },
        [&](int xa, int b, int f) -> const float* {
          return &m_[size_t((xa * a + b) * sm + t * F + f)];
        },
        [&](int p, int q, int f) { return taps[p * m + q] + f; });
  }

  // dM = A dY A^T of tile t, into m_ (outputs past the edge had no gradient).
  PITRAIN_VECTOR_COPIES
  void output_tile_adjoint(const float* dy, int64_t t, int64_t sm) {
    const float* taps[m * m];
    output_taps(dy, t, zeros_.data(), taps);
    const int64_t F = out_.c;
    sandwich_channels<a, m>(
        int(F), [](int i, int j) { return T::AT[j][i]; },
        [&](int p, int q, int f) { return taps[p * m + q] + f; },
        [&](int xa, int b, int f) { return &m_[size_t((xa * a + b) * sm + t * F + f)]; });
  }

  Shape in_, out_;
  int pad_top_, pad_left_;
  Activation act_;
  int64_t tiles_h_, tiles_w_;  // output tiles an image
  int64_t su_;                 // position_stride of the (Cin, F) matrices of U and dU
  std::vector<float> du_;      // (a^2, Cin, F), su_ apart: the transformed kernel's gradient
  // (a^2, tiles, Cin) and (a^2, tiles, F), their positions position_stride apart: transformed
  // input tiles, kept for backward, then dV; their products, in backward dM.
  std::vector<float> v_, m_;
  const std::vector<float> zeros_;  // read where a tile leaves the image
  std::vector<float> discard_;      // written where a tile leaves the image
};

}  // namespace

int winograd_tile(Shape out) {
  // GEMM work is tiles x a^2: the larger tile only where it covers the output with less.
  auto work = [&](int m) {
    return int64_t((out.h + m - 1) / m) * ((out.w + m - 1) / m) * (m + 2) * (m + 2);
  };
  return work(4) < work(2) ? 4 : 2;
}

std::unique_ptr<ConvAlgorithm> make_winograd_conv(Shape in, Shape out, int pad_top, int pad_left,
                                                  int tile, Activation act) {
  if (tile == 4) return std::make_unique<WinogradConv<F4x4>>(in, out, pad_top, pad_left, act);
  return std::make_unique<WinogradConv<F2x2>>(in, out, pad_top, pad_left, act);
}

}  // namespace pitrain
