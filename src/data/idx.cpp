// IDX reader (the MNIST format): two zero bytes, a type byte (0x08 = ubyte), the number of
// dimensions, the dimensions as big-endian u32, then the data.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pitrain/error.h"
#include "pitrain/image_files.h"
#include "pitrain/memory.h"

namespace pitrain {

std::vector<uint8_t> read_file_maybe_gzip(const std::string& path, DeclaredSize declared) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open (" + std::strerror(errno) + "); check the path");
  std::vector<uint8_t> data;
  uint8_t chunk[1 << 16];
  uint64_t limit = sizeof chunk;  // the head, then the declared size and one byte more
  bool have_head = false;
  int n = 0;
  while (data.size() <= limit && (n = gzread(f, chunk, unsigned(std::min<uint64_t>(sizeof chunk, limit + 1 - data.size())))) > 0) {
    data.insert(data.end(), chunk, chunk + n);
    if (!have_head && data.size() >= sizeof chunk) {
      try {
        limit = declared(path, data);
        check_fits_memory(path, double(limit), "check the file");
      } catch (...) {
        gzclose(f);
        throw;
      }
      have_head = true;
    }
  }
  int err = Z_OK;
  const std::string msg = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  if (n < 0) throw Error(path + ": read failed (" + msg + "); the file is damaged or truncated");
  if (have_head && data.size() > limit)
    throw Error(path + ": holds more than the " + std::to_string(limit) +
                " bytes its header declares (a damaged file, or a gzip bomb); check the file");
  return data;
}

// An IDX file's size as its header declares it (the head's size while the header is incomplete:
// the parser names what is wrong).
uint64_t idx_declared_size(const std::string&, const std::vector<uint8_t>& head) {
  if (head.size() < 4 || head.size() < 4 + 4 * size_t(head[3])) return head.size();
  constexpr uint64_t kCap = uint64_t(1) << 50;  // more than any machine's memory
  uint64_t count = 1;
  for (size_t i = 0; i < head[3]; ++i) {
    const uint8_t* p = &head[4 + 4 * i];
    const uint64_t dim = (uint64_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    count = dim != 0 && count > kCap / dim ? kCap : count * dim;  // saturates: three dims of 2^25 wrap 64 bits
  }
  return 4 + 4 * uint64_t(head[3]) + count;
}

namespace {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

IdxArray parse_idx(const std::string& path, const std::vector<uint8_t>& b) {
  if (b.size() < 4 || b[0] != 0 || b[1] != 0) throw Error(path + ": not an IDX file (bad magic)");
  if (b[2] != 0x08) throw Error(path + ": IDX data type 0x" + std::to_string(b[2]) + ", expected 0x08 (unsigned byte)");
  const size_t nd = b[3];
  if (b.size() < 4 + 4 * nd) throw Error(path + ": truncated IDX header");
  IdxArray a;
  const uint64_t have = b.size() - 4 - 4 * nd;
  uint64_t count = 1;
  for (size_t i = 0; i < nd; ++i) {
    const uint8_t* p = &b[4 + 4 * i];
    a.dims.push_back((int64_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]);
    // Compared before multiplying, so that a lying header cannot wrap the product (a 32-bit
    // size_t product could wrap to exactly the bytes the file has).
    const uint64_t dim = uint64_t(a.dims.back());
    if (dim != 0 && count > have / dim)
      throw Error(path + ": IDX header declares more data than the file's " + std::to_string(have) + " bytes (truncated)");
    count *= dim;
  }
  if (have != count)
    throw Error(path + ": IDX header declares " + std::to_string(count) + " bytes of data but the file holds " +
                std::to_string(have));
  a.data.assign(b.begin() + 4 + 4 * nd, b.end());
  return a;
}

}  // namespace

ImageArray parse_idx_images(const std::string& path, const std::vector<uint8_t>& bytes) {
  auto a = parse_idx(path, bytes);
  if (a.dims.size() != 3 || a.dims[1] != kImageSide || a.dims[2] != kImageSide)
    throw Error(path + ": IDX images have " + std::to_string(a.dims.size()) + " dimensions" +
                (a.dims.size() == 3 ? " of (N," + std::to_string(a.dims[1]) + "," + std::to_string(a.dims[2]) + ")" : "") +
                ", expected " + image_rows_shape_text());
  return {std::move(a.data), a.dims[0]};
}

std::vector<uint8_t> parse_idx_labels(const std::string& path, const std::vector<uint8_t>& bytes) {
  auto a = parse_idx(path, bytes);
  if (a.dims.size() != 1) throw Error(path + ": IDX labels must be one-dimensional (N,)");
  return std::move(a.data);
}

ImageArray read_idx_images(const std::string& path) {
  return parse_idx_images(path, read_file_maybe_gzip(path, idx_declared_size));
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  return parse_idx_labels(path, read_file_maybe_gzip(path, idx_declared_size));
}

}  // namespace pitrain
