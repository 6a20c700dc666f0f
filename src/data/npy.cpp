// NumPy .npy reader for uint8 image arrays. Format: "\x93NUMPY", major, minor, header length
// (u16 for version 1, u32 for 2 and 3), then a Python dict literal, then the raw data.
#include <regex>

#include "pitrain/error.h"
#include "pitrain/image_files.h"

namespace pitrain {
namespace {

constexpr size_t kMaxNpyHeader = 10000;

std::string dict_value(const std::string& header, const std::string& key) {
  std::smatch m;
  std::regex re("'" + key + "'\\s*:\\s*('[^']*'|True|False|\\([^)]*\\))");
  if (!std::regex_search(header, m, re)) return "";
  return m[1].str();
}

// The numbers of a shape tuple; a negative one, or one too large for any real file, counts as -1
// (rejected later).
std::vector<int64_t> parse_shape(const std::string& tuple) {
  std::vector<int64_t> dims;
  std::regex num("-?\\d+");
  for (auto it = std::sregex_iterator(tuple.begin(), tuple.end(), num); it != std::sregex_iterator(); ++it)
    dims.push_back(it->str()[0] == '-' || it->length() > 12 ? -1 : std::stoll(it->str()));
  return dims;
}


// Where the data starts and how many images the header declares; throws on a bad header.
struct NpyLayout {
  size_t data_offset;
  int64_t rows;
};

NpyLayout parse_npy_header(const std::string& name, const std::vector<uint8_t>& b) {
  auto fail = [&](const std::string& what) { throw Error(name + ": " + what); };
  static const uint8_t magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (b.size() < 10 || !std::equal(magic, magic + 6, b.begin()))
    fail("not a .npy file (bad magic; expected \\x93NUMPY)");
  const int major = b[6];
  if (major < 1 || major > 3) fail("unsupported .npy version " + std::to_string(major) + " (expected 1, 2 or 3)");
  size_t header_len, offset;
  if (major == 1) {
    header_len = b[8] | (b[9] << 8);
    offset = 10;
  } else {
    if (b.size() < 12) fail("truncated header");
    header_len = b[8] | (b[9] << 8) | (size_t(b[10]) << 16) | (size_t(b[11]) << 24);
    offset = 12;
  }
  if (b.size() - offset < header_len) fail("truncated header");  // offset + header_len wraps a 32-bit size_t
  // NumPy's own limit (max_header_size): a longer header is damaged or hostile, and the regex
  // below would recurse once a character through it, off the end of the stack.
  if (header_len > kMaxNpyHeader)
    fail("header of " + std::to_string(header_len) + " bytes, over the " + std::to_string(kMaxNpyHeader) +
         " that NumPy reads (a damaged file?); save the array again with numpy.save");
  const std::string header(b.begin() + offset, b.begin() + offset + header_len);
  const std::string descr = dict_value(header, "descr");
  if (descr != "'|u1'" && descr != "'<u1'" && descr != "'>u1'" && descr != "'u1'")
    fail("dtype " + (descr.empty() ? std::string("missing") : descr) + ", expected '|u1' (uint8 pixels)");
  if (dict_value(header, "fortran_order") != "False") fail("Fortran order, expected C order (fortran_order False)");
  const std::string shape_text = dict_value(header, "shape");
  const auto shape = parse_shape(shape_text);
  const bool flat = shape.size() == 2 && shape[0] >= 0 && shape[1] == kImagePixels;
  const bool square = shape.size() == 3 && shape[0] >= 0 && shape[1] == kImageSide && shape[2] == kImageSide;
  if (!flat && !square)
    fail("shape " + (shape_text.empty() ? std::string("missing") : shape_text) +
         ", expected (N, " + std::to_string(kImagePixels) + ") or " + image_rows_shape_text() + " (rows of " +
         image_size_text() + " images)");
  return {offset + header_len, shape[0]};
}

// The file's size as its header declares it.
uint64_t npy_declared_size(const std::string& name, const std::vector<uint8_t>& head) {
  const NpyLayout layout = parse_npy_header(name, head);
  return layout.data_offset + uint64_t(layout.rows) * kImagePixels;
}

}  // namespace

ImageArray parse_npy_images(const std::string& name, const std::vector<uint8_t>& b) {
  auto fail = [&](const std::string& what) { throw Error(name + ": " + what); };
  const NpyLayout layout = parse_npy_header(name, b);
  ImageArray out;
  out.rows = layout.rows;
  const uint64_t data_bytes = uint64_t(out.rows) * kImagePixels;  // 64-bit also on 32-bit Pis
  const uint64_t have = b.size() - layout.data_offset;
  if (have < data_bytes)
    fail("truncated data: header says " + std::to_string(out.rows) + " images (" + std::to_string(data_bytes) +
         " bytes) but the file holds " + std::to_string(have));
  if (have > data_bytes)
    fail("file holds " + std::to_string(have - data_bytes) + " bytes beyond the " + std::to_string(out.rows) +
         " images its header declares");
  out.pixels.assign(b.begin() + int64_t(layout.data_offset), b.end());
  return out;
}

ImageArray read_npy_images(const std::string& path) {
  return parse_npy_images(path, read_file_maybe_gzip(path, npy_declared_size));
}

}  // namespace pitrain
