// Readers for the two image formats pitrain prepares from: NumPy .npy (Quick Draw numpy_bitmap)
// and IDX (MNIST, Fashion-MNIST), gzip or plain. Both give 28x28 uint8 images.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pitrain {

// The one definition of the input size: every reader, the dataset file and the model use it.
constexpr int kImageSide = 28;
constexpr int kImagePixels = kImageSide * kImageSide;
inline std::string image_size_text() { return std::to_string(kImageSide) + "x" + std::to_string(kImageSide); }
inline std::string image_rows_shape_text() {  // "(N,28,28)"
  return "(N," + std::to_string(kImageSide) + "," + std::to_string(kImageSide) + ")";
}

struct ImageArray {
  std::vector<uint8_t> pixels;  // (rows, 28, 28), row-major
  int64_t rows = 0;
};

// A .npy of dtype '|u1', C order, shape (N,784) or (N,28,28); anything else throws an Error
// naming the file and what is wrong.
ImageArray read_npy_images(const std::string& path);
ImageArray parse_npy_images(const std::string& name, const std::vector<uint8_t>& bytes);

// IDX files, gzip-compressed or plain: images (N,28,28) ubyte, labels (N,) ubyte. The parse_*
// forms take the decompressed bytes (`name` is only for messages).
ImageArray read_idx_images(const std::string& path);
std::vector<uint8_t> read_idx_labels(const std::string& path);
ImageArray parse_idx_images(const std::string& name, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> parse_idx_labels(const std::string& name, const std::vector<uint8_t>& bytes);

// The whole file, decompressed if it is gzip (zlib reads plain files as they are).
// Never more than the size its header declares: `declared(head)` gets the first bytes (64 KB,
// or the whole file if shorter) and returns the file's full size, which must fit in memory; a
// file (a gzip bomb) that inflates past it is refused before it is.
using DeclaredSize = uint64_t (*)(const std::string& path, const std::vector<uint8_t>& head);
std::vector<uint8_t> read_file_maybe_gzip(const std::string& path, DeclaredSize declared);

}  // namespace pitrain
