// Winograd F(2x2, 3x3) (Lavin and Gray, 2016): a 2x2 output tile is A^T [(G g G^T) . (B^T d B)] A
// for the 4x4 input tile d and the 3x3 kernel g. In the transformed space the 16 positions xi
// are independent: M_xi (tiles, F) = V_xi (tiles, Cin) x U_xi (Cin, F), 16 GEMMs of 2.25x fewer
// multiplications than im2col's. Backward is the exact adjoint of that forward: dM = A dY A^T,
// dU_xi = V_xi^T dM_xi, dV_xi = dM_xi U_xi^T, then dg = G^T dU G and dd = B dV B^T. Every
// transform runs along the channels, which NHWC keeps contiguous, so its loops vectorise.
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>

#include "pitrain/conv.h"
#include "pitrain/matrix.h"

namespace pitrain {
namespace {

// A pixel's channels (or filters) as an Eigen array, so that one line below is one vector loop,
// fully unrolled where the count N is known when compiling (see with_count).
template <int N>
using ChannelsIn = Eigen::Map<const Eigen::Array<float, N, 1>>;
template <int N>
using ChannelsOut = Eigen::Map<Eigen::Array<float, N, 1>>;

// Calls f(std::integral_constant<int, n>) for the usual channel counts, else with Eigen::Dynamic.
template <class F>
void with_count(int n, F f) {
  switch (n) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: return f(std::integral_constant<int, Eigen::Dynamic>{});
  }
}

class WinogradConv : public ConvAlgorithm {
 public:
  WinogradConv(Shape in, Shape out, int pad_top, int pad_left)
      : in_(in), out_(out), pad_top_(pad_top), pad_left_(pad_left), tiles_h_((out.h + 1) / 2),
        tiles_w_((out.w + 1) / 2), u_(16 * size_t(in.c) * out.c), du_(u_.size()),
        scratch_(16 * size_t(std::max(in.c, out.c))), zeros_(scratch_.size() / 16, 0.0f), discard_(zeros_.size()) {}

  void reserve(int batch) override {
    const size_t tiles = size_t(batch) * tiles_h_ * tiles_w_;
    v_.resize(16 * tiles * in_.c);
    m_.resize(16 * tiles * out_.c);
  }

  void forward(const float* x, const float* kernel, float* y, int n) override {
    const int64_t tiles = int64_t(n) * tiles_h_ * tiles_w_, C = in_.c, F = out_.c;
    with_count(int(F), [&](auto NF) { transform_kernel<NF>(kernel); });
    with_count(int(C), [&](auto NC) {
      for (int64_t t = 0; t < tiles; ++t) transform_input_tile<NC>(x, t, tiles);
    });
    for (int xi = 0; xi < 16; ++xi)
      gemm(false, false, int(tiles), int(F), int(C), &v_[size_t(xi * tiles * C)], &u_[size_t(xi * C * F)],
           &m_[size_t(xi * tiles * F)]);
    with_count(int(F), [&](auto NF) {
      for (int64_t t = 0; t < tiles; ++t) transform_output_tile<NF>(y, t, tiles);
    });
  }

  void backward(const float* dy, const float*, float* dkernel, float* dx, int n) override {
    const int64_t tiles = int64_t(n) * tiles_h_ * tiles_w_, C = in_.c, F = out_.c;
    with_count(int(F), [&](auto NF) {
      for (int64_t t = 0; t < tiles; ++t) output_tile_adjoint<NF>(dy, t, tiles);  // dM into m_
    });
    for (int xi = 0; xi < 16; ++xi)
      gemm(true, false, int(C), int(F), int(tiles), &v_[size_t(xi * tiles * C)], &m_[size_t(xi * tiles * F)],
           &du_[size_t(xi * C * F)]);
    with_count(int(F), [&](auto NF) { kernel_adjoint<NF>(dkernel); });
    if (!dx) return;
    for (int xi = 0; xi < 16; ++xi)  // V is spent: dV into v_
      gemm(false, true, int(tiles), int(C), int(F), &m_[size_t(xi * tiles * F)], &u_[size_t(xi * C * F)],
           &v_[size_t(xi * tiles * C)]);
    std::fill_n(dx, int64_t(n) * in_.size(), 0.0f);
    with_count(int(C), [&](auto NC) {
      for (int64_t t = 0; t < tiles; ++t) input_tile_adjoint<NC>(dx, t, tiles);
    });
  }

 private:
  // The 4x4 input pixels of tile t (image s, tile row ty, column tx): a pointer to each one's
  // channels, the zeros (read) or the discard buffer (written) where the tile leaves the image.
  template <class T>
  void input_taps(T* image, int64_t t, T* outside, T* taps[16]) const {
    const int64_t s = t / (tiles_h_ * tiles_w_), ty = t / tiles_w_ % tiles_h_, tx = t % tiles_w_;
    for (int r = 0; r < 4; ++r)
      for (int q = 0; q < 4; ++q) {
        const int64_t ih = 2 * ty - pad_top_ + r, iw = 2 * tx - pad_left_ + q;
        const bool inside = ih >= 0 && ih < in_.h && iw >= 0 && iw < in_.w;
        taps[r * 4 + q] = inside ? image + ((s * in_.h + ih) * in_.w + iw) * in_.c : outside;
      }
  }

  // The 2x2 output pixels of tile t, likewise.
  template <class T>
  void output_taps(T* image, int64_t t, T* outside, T* taps[4]) const {
    const int64_t s = t / (tiles_h_ * tiles_w_), ty = t / tiles_w_ % tiles_h_, tx = t % tiles_w_;
    for (int p = 0; p < 2; ++p)
      for (int q = 0; q < 2; ++q) {
        const int64_t oh = 2 * ty + p, ow = 2 * tx + q;
        taps[p * 2 + q] = oh < out_.h && ow < out_.w ? image + ((s * out_.h + oh) * out_.w + ow) * out_.c : outside;
      }
  }

  // U = G g G^T for every (Cin, F) pair; kernel (3, 3, Cin, F), u_ (16, Cin, F).
  template <int N>
  void transform_kernel(const float* kernel) {
    const int C = in_.c, F = out_.c;
    const int64_t xs = int64_t(C) * F;  // from one position xi to the next
    for (int c = 0; c < C; ++c) {
      auto g = [&](int i, int j) { return ChannelsIn<N>(kernel + (int64_t(i * 3 + j) * C + c) * F, F); };
      auto t = [&](int i, int j) { return ChannelsOut<N>(&scratch_[size_t(i * 4 + j) * F], F); };
      auto u = [&](int a, int b) { return ChannelsOut<N>(&u_[size_t((a * 4 + b) * xs + c * F)], F); };
      for (int i = 0; i < 3; ++i) {  // G along the kernel's columns
        t(i, 0) = g(i, 0), t(i, 1) = 0.5f * (g(i, 0) + g(i, 1) + g(i, 2));
        t(i, 2) = 0.5f * (g(i, 0) - g(i, 1) + g(i, 2)), t(i, 3) = g(i, 2);
      }
      for (int j = 0; j < 4; ++j) {  // and along its rows
        u(0, j) = t(0, j), u(1, j) = 0.5f * (t(0, j) + t(1, j) + t(2, j));
        u(2, j) = 0.5f * (t(0, j) - t(1, j) + t(2, j)), u(3, j) = t(2, j);
      }
    }
  }

  // dg = G^T dU G, the adjoint of transform_kernel.
  template <int N>
  void kernel_adjoint(float* dkernel) {
    const int C = in_.c, F = out_.c;
    const int64_t xs = int64_t(C) * F;
    for (int c = 0; c < C; ++c) {
      auto du = [&](int a, int b) { return ChannelsIn<N>(&du_[size_t((a * 4 + b) * xs + c * F)], F); };
      auto dt = [&](int i, int j) { return ChannelsOut<N>(&scratch_[size_t(i * 4 + j) * F], F); };
      auto dg = [&](int i, int j) { return ChannelsOut<N>(dkernel + (int64_t(i * 3 + j) * C + c) * F, F); };
      for (int j = 0; j < 4; ++j) {
        dt(0, j) = du(0, j) + 0.5f * (du(1, j) + du(2, j)), dt(1, j) = 0.5f * (du(1, j) - du(2, j));
        dt(2, j) = 0.5f * (du(1, j) + du(2, j)) + du(3, j);
      }
      for (int i = 0; i < 3; ++i) {
        dg(i, 0) = dt(i, 0) + 0.5f * (dt(i, 1) + dt(i, 2)), dg(i, 1) = 0.5f * (dt(i, 1) - dt(i, 2));
        dg(i, 2) = 0.5f * (dt(i, 1) + dt(i, 2)) + dt(i, 3);
      }
    }
  }

  // V = B^T d B of tile t, every channel; v_ (16, tiles, Cin).
  template <int N>
  void transform_input_tile(const float* x, int64_t t, int64_t tiles) {
    const float* taps[16];
    input_taps(x, t, zeros_.data(), taps);
    const int C = in_.c;
    auto d = [&](int r, int q) { return ChannelsIn<N>(taps[r * 4 + q], C); };
    auto e = [&](int r, int q) { return ChannelsOut<N>(&scratch_[size_t(r * 4 + q) * C], C); };
    auto v = [&](int a, int b) { return ChannelsOut<N>(&v_[size_t(((a * 4 + b) * tiles + t) * C)], C); };
    for (int r = 0; r < 4; ++r)  // B^T along the rows of the tile
      e(r, 0) = d(r, 0) - d(r, 2), e(r, 1) = d(r, 1) + d(r, 2), e(r, 2) = d(r, 2) - d(r, 1), e(r, 3) = d(r, 1) - d(r, 3);
    for (int q = 0; q < 4; ++q)  // and along its columns
      v(0, q) = e(0, q) - e(2, q), v(1, q) = e(1, q) + e(2, q), v(2, q) = e(2, q) - e(1, q), v(3, q) = e(1, q) - e(3, q);
  }

  // dd = B dV B^T of tile t, added into dx (tiles overlap by two pixels).
  template <int N>
  void input_tile_adjoint(float* dx, int64_t t, int64_t tiles) {
    float* taps[16];
    input_taps(dx, t, discard_.data(), taps);
    const int C = in_.c;
    auto dv = [&](int a, int b) { return ChannelsIn<N>(&v_[size_t(((a * 4 + b) * tiles + t) * C)], C); };
    auto de = [&](int r, int q) { return ChannelsOut<N>(&scratch_[size_t(r * 4 + q) * C], C); };
    auto dd = [&](int r, int q) { return ChannelsOut<N>(taps[r * 4 + q], C); };
    for (int q = 0; q < 4; ++q)
      de(0, q) = dv(0, q), de(1, q) = dv(1, q) - dv(2, q) + dv(3, q), de(2, q) = dv(1, q) + dv(2, q) - dv(0, q),
      de(3, q) = -dv(3, q);
    for (int r = 0; r < 4; ++r)
      dd(r, 0) += de(r, 0), dd(r, 1) += de(r, 1) - de(r, 2) + de(r, 3), dd(r, 2) += de(r, 1) + de(r, 2) - de(r, 0),
      dd(r, 3) -= de(r, 3);
  }

  // Y = A^T M A of tile t, every filter; m_ (16, tiles, F).
  template <int N>
  void transform_output_tile(float* y, int64_t t, int64_t tiles) {
    float* taps[4];
    output_taps(y, t, discard_.data(), taps);
    const int F = out_.c;
    auto m = [&](int a, int b) { return ChannelsIn<N>(&m_[size_t(((a * 4 + b) * tiles + t) * F)], F); };
    auto r = [&](int a, int q) { return ChannelsOut<N>(&scratch_[size_t(a * 2 + q) * F], F); };
    auto out = [&](int p, int q) { return ChannelsOut<N>(taps[p * 2 + q], F); };
    for (int a = 0; a < 4; ++a)  // A^T along the rows
      r(a, 0) = m(a, 0) + m(a, 1) + m(a, 2), r(a, 1) = m(a, 1) - m(a, 2) - m(a, 3);
    for (int q = 0; q < 2; ++q)  // and along the columns
      out(0, q) = r(0, q) + r(1, q) + r(2, q), out(1, q) = r(1, q) - r(2, q) - r(3, q);
  }

  // dM = A dY A^T of tile t, into m_ (outputs past the edge had no gradient).
  template <int N>
  void output_tile_adjoint(const float* dy, int64_t t, int64_t tiles) {
    const float* taps[4];
    output_taps(dy, t, zeros_.data(), taps);
    const int F = out_.c;
    auto y = [&](int p, int q) { return ChannelsIn<N>(taps[p * 2 + q], F); };
    auto dr = [&](int a, int q) { return ChannelsOut<N>(&scratch_[size_t(a * 2 + q) * F], F); };
    auto dm = [&](int a, int b) { return ChannelsOut<N>(&m_[size_t(((a * 4 + b) * tiles + t) * F)], F); };
    for (int q = 0; q < 2; ++q)
      dr(0, q) = y(0, q), dr(1, q) = y(0, q) + y(1, q), dr(2, q) = y(0, q) - y(1, q), dr(3, q) = -y(1, q);
    for (int a = 0; a < 4; ++a)
      dm(a, 0) = dr(a, 0), dm(a, 1) = dr(a, 0) + dr(a, 1), dm(a, 2) = dr(a, 0) - dr(a, 1), dm(a, 3) = -dr(a, 1);
  }

  Shape in_, out_;
  int pad_top_, pad_left_;
  int64_t tiles_h_, tiles_w_;  // output tiles an image
  std::vector<float> u_, du_;  // (16, Cin, F): the transformed kernel; its gradient
  std::vector<float> v_;       // (16, tiles, Cin): transformed input tiles, kept for backward; then dV
  std::vector<float> m_;       // (16, tiles, F): their products; in backward dM
  std::vector<float> scratch_;  // (16, max(Cin, F)): a tile half transformed
  const std::vector<float> zeros_;  // read where a tile leaves the image
  std::vector<float> discard_;  // written where a tile leaves the image
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_winograd_conv(Shape in, Shape out, int pad_top, int pad_left) {
  return std::make_unique<WinogradConv>(in, out, pad_top, pad_left);
}

}  // namespace pitrain
