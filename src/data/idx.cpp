// IDX files (the MNIST format): two zero bytes, a type byte (0x08 = ubyte), the number of
// dimensions, the dimensions as big-endian u32, then the data. The header's parser; ArrayRows
// reads the data.
#include "pitrain/error.h"
#include "pitrain/image_files.h"
#include "pitrain/memory.h"

namespace pitrain {
namespace {

struct IdxHeader {
  std::vector<int64_t> dims;
  size_t size = 0;  // bytes
};

IdxHeader parse_idx_header(const std::string& path, const std::vector<uint8_t>& b) {
  if (b.size() < 4 || b[0] != 0 || b[1] != 0) throw Error(path + ": not an IDX file (bad magic)");
  if (b[2] != 0x08)
    throw Error(path + ": IDX data type 0x" + std::to_string(b[2]) +
                ", expected 0x08 (unsigned byte)");
  IdxHeader h;
  h.size = 4 + 4 * size_t(b[3]);
  if (b.size() < h.size) throw Error(path + ": truncated IDX header");
  // The data's bytes: a header whose dimensions overflow them is refused as such.
  uint64_t count = 1;
  for (size_t i = 0; i < b[3]; ++i) {
    const uint8_t* p = &b[4 + 4 * i];
    h.dims.push_back((int64_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]);
    count = checked_mul<uint64_t>(count, uint64_t(h.dims.back()),
                                  path + ": the IDX header's dimensions");
  }
  return h;
}

}  // namespace

RowLayout idx_image_layout(const std::string& path, const std::vector<uint8_t>& head) {
  const IdxHeader h = parse_idx_header(path, head);
  const auto& d = h.dims;
  const Shape image = d.size() == 3 ? image_shape_of(d) : Shape{0, 0, 0};
  if (!image_shape_ok(image))
    throw Error(
        path + ": IDX images have " + std::to_string(d.size()) + " dimensions" +
        (d.size() == 3 ? " of (N," + std::to_string(d[1]) + "," + std::to_string(d[2]) + ")" : "") +
        ", expected (N,H,W) with sides up to " + std::to_string(kMaxImageSide));
  return {h.size, d[0], uint64_t(image.size()), image};
}

RowLayout idx_label_layout(const std::string& path, const std::vector<uint8_t>& head) {
  const IdxHeader h = parse_idx_header(path, head);
  if (h.dims.size() != 1) throw Error(path + ": IDX labels must be one-dimensional (N,)");
  return {h.size, h.dims[0], 1, Shape{}};
}

ImageArray read_idx_images(const std::string& path) {
  return read_images(ArrayRows(path, idx_image_layout));
}

ImageArray parse_idx_images(const std::string& path, const std::vector<uint8_t>& bytes) {
  return read_images(ArrayRows(path, bytes, idx_image_layout));
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  return ArrayRows(path, idx_label_layout).read_rest();
}

std::vector<uint8_t> parse_idx_labels(const std::string& path, const std::vector<uint8_t>& bytes) {
  return ArrayRows(path, bytes, idx_label_layout).read_rest();
}

}  // namespace pitrain
