// Readers for the two image formats pitrain prepares from: NumPy .npy (Quick Draw numpy_bitmap,
// or any (N,H,W[,C]) uint8 images) and IDX (MNIST, Fashion-MNIST), gzip or plain.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pitrain/shape.h"

struct gzFile_s;  // zlib's gzFile

namespace pitrain {

// Quick Draw's drawing size (kDrawingShape): PNG and PGM inputs, and the play page's drawings.
constexpr int kImageSide = 28;
constexpr int kImagePixels = kImageSide * kImageSide;
inline std::string image_size_text() {
  return std::to_string(kImageSide) + "x" + std::to_string(kImageSide);
}

struct ImageArray {
  std::vector<uint8_t> pixels;  // (rows, H, W, C), row-major
  int64_t rows = 0;
  Shape shape = kDrawingShape;  // of an image
};

// How a file's data divide into rows, as its header declares them.
struct RowLayout {
  size_t data_offset = 0;  // the header's bytes
  int64_t rows = 0;
  uint64_t row_bytes = 0;
  Shape image;  // image files: a row's shape
};
// A header's parser: the layout that the first bytes of a file (its head: 64 KB, or the whole file
// if shorter) declare, or an Error naming the file and what is wrong.
using LayoutOf = RowLayout (*)(const std::string& name, const std::vector<uint8_t>& head);
// Images: (N,784) (Quick Draw's 28x28), (N,H,W) or (N,H,W,C) uint8.
RowLayout npy_image_layout(const std::string& name, const std::vector<uint8_t>& head);
// Images: (N,H,W) ubyte.
RowLayout idx_image_layout(const std::string& name, const std::vector<uint8_t>& head);
// Labels: (N,) ubyte.
RowLayout idx_label_layout(const std::string& name, const std::vector<uint8_t>& head);

// The rows of a file, gzip-compressed or plain (zlib reads plain files as they are), or of bytes in
// memory, a few at a time: what is held is what the caller reads, whatever the header declares.
// Errors name the file: a bad header (on construction), data that end before the rows the header
// declares, or that go on after them (a damaged file, or a gzip bomb: inflated one byte past them).
class ArrayRows {
 public:
  ArrayRows(const std::string& path, LayoutOf layout);
  // Bytes in memory; `name` only for messages.
  ArrayRows(const std::string& name, std::vector<uint8_t> bytes, LayoutOf layout);
  int64_t rows() const { return layout_.rows; }
  const Shape& image_shape() const { return layout_.image; }
  // Appends the next rows, at most `max_rows` of them, to `out`; returns how many (0 after the
  // last).
  int64_t read(int64_t max_rows, std::vector<uint8_t>& out);
  // Every row not read yet, once their declared size is known to fit in memory.
  std::vector<uint8_t> read_rest();

 private:
  void parse_header(LayoutOf layout);  // from the buffer
  size_t pull(uint8_t* to, size_t n);  // up to n bytes: the buffer's first, then the file's
  void check_end();                    // after the last row: nothing more
  std::string name_;
  // Null when the bytes are in memory only.
  std::unique_ptr<gzFile_s, int (*)(gzFile_s*)> file_{nullptr, nullptr};
  std::vector<uint8_t> buffer_;  // the head (or the bytes in memory), read from buffer_at_ on
  size_t buffer_at_ = 0;
  RowLayout layout_;
  uint64_t data_bytes_ = 0;  // rows x row_bytes
  int64_t done_ = 0;         // rows read
};

// Every row not read yet of a file of images, in its image shape (rows.read_rest()).
ImageArray read_images(ArrayRows rows);

// A .npy of dtype '|u1', C order, shape (N,784), (N,H,W) or (N,H,W,C); anything else throws an
// Error naming the file and what is wrong.
ImageArray read_npy_images(const std::string& path);
ImageArray parse_npy_images(const std::string& name, const std::vector<uint8_t>& bytes);

// IDX files, gzip-compressed or plain: images (N,H,W) ubyte, labels (N,) ubyte. The parse_*
// forms take the decompressed bytes (`name` is only for messages).
ImageArray read_idx_images(const std::string& path);
std::vector<uint8_t> read_idx_labels(const std::string& path);
ImageArray parse_idx_images(const std::string& name, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> parse_idx_labels(const std::string& name, const std::vector<uint8_t>& bytes);

}  // namespace pitrain
