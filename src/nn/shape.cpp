#include "pitrain/shape.h"

#include <algorithm>
#include <regex>

#include "pitrain/error.h"

namespace pitrain {

std::string shape_text(const Shape& s) {
  return std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c);
}

bool image_shape_ok(const Shape& s) {
  return s.h >= 1 && s.h <= kMaxImageSide && s.w >= 1 && s.w <= kMaxImageSide && s.c >= 1 &&
         s.c <= kMaxChannels;
}

Shape image_shape_of(const std::vector<int64_t>& dims) {
  if (dims.size() != 3 && dims.size() != 4) return Shape{0, 0, 0};
  const auto in_range = [](int64_t v, int most) {
    return int(std::clamp<int64_t>(v, 0, most + 1));
  };
  return {in_range(dims[1], kMaxImageSide), in_range(dims[2], kMaxImageSide),
          dims.size() == 4 ? in_range(dims[3], kMaxChannels) : 1};
}

std::string image_limits_text() {
  return "sides up to " + std::to_string(kMaxImageSide) + ", up to " +
         std::to_string(kMaxChannels) + " channels";
}

Shape parse_shape(const std::string& text, const std::string& what) {
  static const std::regex form(R"(([0-9]{1,5})x([0-9]{1,5})(?:x([0-9]{1,2}))?)");
  std::smatch m;
  Shape s;
  if (std::regex_match(text, m, form))
    s = {std::stoi(m[1]), std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : 1};
  if (!m.size() || !image_shape_ok(s))
    throw UsageError(what + " " + text + ": give HxWxC, e.g. 28x28x1 or 32x32x3 (sides 1 to " +
                     std::to_string(kMaxImageSide) + ", 1 to " + std::to_string(kMaxChannels) +
                     " channels)");
  return s;
}

}  // namespace pitrain
