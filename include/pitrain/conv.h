// The convolution proper of Conv2D (no bias, no activation), stride 1, NHWC, Keras' kernel
// layout (k, k, Cin, F): two algorithms behind one interface, chosen per layer shape.
//   im2col    patches (n*Ho*Wo, k*k*Cin) times the kernel: one GEMM a pass; any k
//   Winograd  F(2x2, 3x3): each 2x2 output tile from a 4x4 input tile in 16 GEMMs of
//             (tiles, Cin) x (Cin, F), 2.25x fewer multiplications (Lavin and Gray, 2016); 3x3 only
#pragma once
#include <Eigen/Core>
#include <memory>
#include <type_traits>

#include "pitrain/layers.h"

namespace pitrain {

class ConvAlgorithm {
 public:
  virtual ~ConvAlgorithm() = default;
  virtual void reserve(int batch) = 0;
  // x (n, H, W, Cin) -> y (n, Ho, Wo, F). Keeps what backward needs.
  virtual void forward(const float* x, const float* kernel, float* y, int n) = 0;
  // From dy (n, Ho, Wo, F) of the last forward: dkernel (overwritten), and dx unless null.
  virtual void backward(const float* dy, const float* kernel, float* dkernel, float* dx, int n) = 0;
};

// For the algorithms: a pixel's channels (or filters) as an Eigen array, so that one line is one
// vector loop, fully unrolled where the count N is known when compiling (see with_count).
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

std::unique_ptr<ConvAlgorithm> make_im2col_conv(Shape in, Shape out, int k, int pad_top, int pad_left);
std::unique_ptr<ConvAlgorithm> make_winograd_conv(Shape in, Shape out, int pad_top, int pad_left);

// Which one, by measurement (bench/RESULTS.md, compute engine): Winograd for 3x3 kernels over
// enough input channels that its (tiles, Cin) x (Cin, F) GEMMs run near full speed; else im2col.
constexpr int kWinogradMinChannels = 8;
std::unique_ptr<ConvAlgorithm> make_conv_algorithm(Shape in, Shape out, int k, int pad_top, int pad_left);

}  // namespace pitrain
