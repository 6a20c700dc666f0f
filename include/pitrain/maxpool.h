// MaxPool2D's kernels, 2x2 windows, stride 2, Keras 'valid' (an odd last row or column is
// dropped), over NHWC: the layer runs them on its input, and the direct convolution on two
// rows of its own output at a time when it pools as well (conv.h, ConvAlgorithm::fuse_pool).
#pragma once
#include <cstdint>

#include "pitrain/layers.h"

namespace pitrain {

// x (n, H, W, C) -> y and argmax (n, H/2, W/2, C): each window's maximum, and which of its
// four taps held it (row-major; the first of equal ones).
void maxpool_forward(const float* x, float* y, uint8_t* argmax, int n, Shape in);
// dx (n, H, W, C), every element written: dy at each window's maximum, 0 elsewhere.
void maxpool_backward(const float* dy, const uint8_t* argmax, float* dx, int n, Shape in);

}  // namespace pitrain
