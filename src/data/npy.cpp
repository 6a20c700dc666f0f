// NumPy .npy files of uint8 images: the header's parser; ArrayRows reads the data. Format:
// "\x93NUMPY", major, minor, header length (u16 for version 1, u32 for 2 and 3), then a Python
// dict literal, then the raw data.
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
std::vector<int64_t> parse_npy_shape(const std::string& tuple) {
  std::vector<int64_t> dims;
  std::regex num("-?\\d+");
  for (auto it = std::sregex_iterator(tuple.begin(), tuple.end(), num);
       it != std::sregex_iterator(); ++it)
    dims.push_back(it->str()[0] == '-' || it->length() > 12 ? -1 : std::stoll(it->str()));
  return dims;
}

}  // namespace

RowLayout npy_image_layout(const std::string& name, const std::vector<uint8_t>& b) {
  auto fail = [&](const std::string& what) { throw Error(name + ": " + what); };
  static const uint8_t magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (b.size() < 10 || !std::equal(magic, magic + 6, b.begin()))
    fail("not a .npy file (bad magic; expected \\x93NUMPY)");
  const int major = b[6];
  if (major < 1 || major > 3)
    fail("unsupported .npy version " + std::to_string(major) + " (expected 1, 2 or 3)");
  size_t header_len, offset;
  if (major == 1) {
    header_len = b[8] | (b[9] << 8);
    offset = 10;
  } else {
    if (b.size() < 12) fail("truncated header");
    header_len = b[8] | (b[9] << 8) | (size_t(b[10]) << 16) | (size_t(b[11]) << 24);
    offset = 12;
  }
  // offset + header_len wraps a 32-bit size_t.
  if (b.size() - offset < header_len) fail("truncated header");
  // NumPy's own limit (max_header_size): a longer header is damaged or hostile, and the regex
  // below would recurse once a character through it, off the end of the stack.
  if (header_len > kMaxNpyHeader)
    fail("header of " + std::to_string(header_len) + " bytes, over the " +
         std::to_string(kMaxNpyHeader) +
         " that NumPy reads (a damaged file?); save the array again with numpy.save");
  const std::string header(b.begin() + offset, b.begin() + offset + header_len);
  const std::string descr = dict_value(header, "descr");
  if (descr != "'|u1'" && descr != "'<u1'" && descr != "'>u1'" && descr != "'u1'")
    fail("dtype " + (descr.empty() ? std::string("missing") : descr) +
         ", expected '|u1' (uint8 pixels)");
  if (dict_value(header, "fortran_order") != "False")
    fail("Fortran order, expected C order (fortran_order False)");
  const std::string tuple = dict_value(header, "shape");
  const auto shape = parse_npy_shape(tuple);
  const bool flat = shape.size() == 2 && shape[1] == kImagePixels;  // Quick Draw's rows
  const Shape image = flat ? kDrawingShape : image_shape_of(shape);
  if (shape.empty() || shape[0] < 0 || !image_shape_ok(image))
    fail("shape " + (tuple.empty() ? std::string("missing") : tuple) + ", expected (N, " +
         std::to_string(kImagePixels) + ") as Quick Draw's, (N, H, W) or (N, H, W, C) images (" +
         image_limits_text() + ")");
  return {offset + header_len, shape[0], uint64_t(image.size()), image};
}

ImageArray read_npy_images(const std::string& path) {
  return read_images(ArrayRows(path, npy_image_layout));
}

ImageArray parse_npy_images(const std::string& name, const std::vector<uint8_t>& bytes) {
  return read_images(ArrayRows(name, bytes, npy_image_layout));
}

}  // namespace pitrain
