// The convolution of Conv2D with its bias and activation, stride 1, NHWC, Keras' kernel layout
// (k, k, Cin, F): three algorithms behind one interface, chosen per layer shape.
//   direct    each output pixel's F sums over its k*k*Cin taps in registers, the bias and the
//             activation added before it is written; backward in one pass over dy too; any k;
//             where a 2x2 max pool follows, pools its output from a scratch in cache
//   im2col    patches (n*Ho*Wo, k*k*Cin) times the kernel: one GEMM a pass; any k
//   Winograd  F(m x m, 3x3), m = 2 or 4: each m x m output tile from an (m+2) x (m+2) input tile
//             in (m+2)^2 GEMMs of (tiles, Cin) x (Cin, F), 2.25x (m = 2) or 4x (m = 4) fewer
//             multiplications (Lavin and Gray, 2016); 3x3 only
#pragma once
#include <memory>

#include "pitrain/layers.h"

namespace pitrain {

class ConvAlgorithm {
 public:
  virtual ~ConvAlgorithm() = default;
  virtual void reserve(int batch) = 0;
  // What it derives from the kernel before forward and backward (Layer::prepared_floats):
  // floats, and how, into `prepared`.
  virtual int64_t prepared_floats() const { return 0; }
  virtual void prepare(const float* /*kernel*/, float* /*prepared*/) const {}
  // y = act(conv(x) + bias): x (n, H, W, Cin) -> y (n, Ho, Wo, F). Keeps what backward needs.
  virtual void forward(const float* x, const float* kernel, const float* bias,
                       const float* prepared, float* y, int n) = 0;
  // From dy (n, Ho, Wo, F), the gradient at the last forward's y, taken through the activation
  // in place: dkernel and dbias (overwritten), and dx unless null. x and y: that forward's.
  virtual void backward(const float* x, const float* y, float* dy, const float* kernel,
                        const float* prepared, float* dkernel, float* dbias, float* dx, int n) = 0;
  // Takes over the 2x2 max pool (maxpool.h) that follows it if it can, before reserve(), and
  // returns whether it did: then forward's y is the pooled output (n, Ho/2, Wo/2, F), and
  // backward's y and dy are that and its gradient. The direct convolution does, so that its
  // output never leaves the cache: on `cnn`'s first layer that output is 4x the pooled one.
  virtual bool fuse_pool() { return false; }
};

// act: none or relu.
std::unique_ptr<ConvAlgorithm> make_direct_conv(Shape in, Shape out, int k, int pad_top,
                                                int pad_left, Activation act);
std::unique_ptr<ConvAlgorithm> make_im2col_conv(Shape in, Shape out, int k, int pad_top,
                                                int pad_left, Activation act);
// tile: m, 2 or 4. winograd_tile: the m whose tiles cover the output with the fewest GEMM rows.
std::unique_ptr<ConvAlgorithm> make_winograd_conv(Shape in, Shape out, int pad_top, int pad_left,
                                                  int tile, Activation act);
int winograd_tile(Shape out);

// Which one, tuned with bench/compute.sh (bench/RESULTS.md, Compute): direct for inputs so shallow
// that a patch is too short for a GEMM to pay (3x3 over 1, 2 and 3 channels, 32 filters, 8 rows:
// faster than im2col, forward and backward); Winograd for 3x3 kernels over enough input channels
// that its (tiles, Cin) x (Cin, F) GEMMs run near full speed; else im2col.
constexpr int kDirectMaxDepth = 27;  // k * k * Cin
constexpr int kWinogradMinChannels = 8;
std::unique_ptr<ConvAlgorithm> make_conv_algorithm(Shape in, Shape out, int k, int pad_top,
                                                   int pad_left, Activation act);

}  // namespace pitrain
