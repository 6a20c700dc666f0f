// Per-sample shapes, channels-last: (H, W, C). A dataset's images and a model's input have one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pitrain {

// A vector (after flatten or dense) is (1, 1, C) with flat set, which only changes how it is
// printed: (None, C) as Keras shows it.
struct Shape {
  int h = 1, w = 1, c = 1;
  bool flat = false;
  int64_t size() const { return int64_t(h) * w * c; }
  bool operator==(const Shape& o) const { return h == o.h && w == o.w && c == o.c; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
};

// Quick Draw's drawings, 28x28 grey: the images of a dataset file that does not say otherwise,
// and what `pitrain serve`'s drawing page makes.
constexpr Shape kDrawingShape{28, 28, 1};
// The largest side and channel count an image may have (a 4096x4096x4 image is 64 MB).
constexpr int kMaxImageSide = 4096, kMaxChannels = 4;

// "28x28x1".
std::string shape_text(const Shape& s);
// "HxWxC" (or "HxW": one channel) to a shape; a UsageError naming `what` and the form otherwise.
Shape parse_shape(const std::string& text, const std::string& what);
// Whether an image shape is one pitrain takes: sides 1 to kMaxImageSide, 1 to kMaxChannels
// channels.
bool image_shape_ok(const Shape& s);
// The image shape of an array of (N,H,W) or (N,H,W,C) images; any other rank, or sides and
// channels out of range, gives a shape that image_shape_ok() refuses.
Shape image_shape_of(const std::vector<int64_t>& dims);
// "sides up to 4096, up to 4 channels": the limits, for the errors that refuse a shape.
std::string image_limits_text();

}  // namespace pitrain
