// ArrayRows: the one reader of .npy and IDX data, a few rows at a time, from a file (gzip or plain)
// or from bytes in memory; the formats' headers are parsed in npy.cpp and idx.cpp.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pitrain/error.h"
#include "pitrain/image_files.h"
#include "pitrain/memory.h"

namespace pitrain {
namespace {

constexpr size_t kHeadBytes = 1 << 16;  // what a header parser gets: any header fits
// What a read appends at a time: memory grows with the data read.
constexpr size_t kChunkBytes = 1 << 20;

}  // namespace

ArrayRows::ArrayRows(const std::string& path, LayoutOf layout) : name_(path) {
  file_ = {gzopen(path.c_str(), "rb"), gzclose};
  if (!file_) throw Error(path + ": cannot open (" + std::strerror(errno) + "); check the path");
  std::vector<uint8_t> head(kHeadBytes);
  head.resize(pull(head.data(), head.size()));
  buffer_ = std::move(head);
  parse_header(layout);
}

ArrayRows::ArrayRows(const std::string& name, std::vector<uint8_t> bytes, LayoutOf layout)
    : name_(name), buffer_(std::move(bytes)) {
  parse_header(layout);
}

void ArrayRows::parse_header(LayoutOf layout) {
  layout_ = layout(name_, buffer_);
  if (layout_.data_offset > buffer_.size()) throw Error(name_ + ": truncated header");
  buffer_at_ = layout_.data_offset;
  data_bytes_ = checked_mul<uint64_t>(uint64_t(layout_.rows), layout_.row_bytes,
                                      name_ + ": the header's rows x row bytes");
}

size_t ArrayRows::pull(uint8_t* to, size_t n) {
  const size_t from_buffer = std::min(n, buffer_.size() - buffer_at_);
  std::copy_n(buffer_.data() + buffer_at_, from_buffer, to);
  buffer_at_ += from_buffer;
  size_t got = from_buffer;
  while (file_ && got < n) {
    const int r = gzread(file_.get(), to + got, unsigned(std::min<size_t>(n - got, kChunkBytes)));
    if (r < 0) {
      int error = Z_OK;
      throw Error(name_ + ": read failed (" + gzerror(file_.get(), &error) +
                  "); the file is damaged or truncated");
    }
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

int64_t ArrayRows::read(int64_t max_rows, std::vector<uint8_t>& out) {
  const int64_t n = std::min(max_rows, layout_.rows - done_);
  const uint64_t have = uint64_t(done_) * layout_.row_bytes;  // no overflow: at most data_bytes_
  out.reserve(out.size() + size_t(uint64_t(n) * layout_.row_bytes));  // no doubling on the way
  for (uint64_t want = uint64_t(n) * layout_.row_bytes, got = 0; got < want;) {
    const size_t step = size_t(std::min<uint64_t>(want - got, kChunkBytes)), at = out.size();
    out.resize(at + step);
    const size_t pulled = pull(out.data() + at, step);
    out.resize(at + pulled);
    got += pulled;
    if (pulled < step)
      throw Error(name_ + ": truncated data: its header declares " + std::to_string(layout_.rows) +
                  " rows (" + std::to_string(data_bytes_) + " bytes of data) but the file holds " +
                  std::to_string(have + got) + "; download or save the file again");
  }
  done_ += n;
  if (done_ == layout_.rows) check_end();
  return n;
}

void ArrayRows::check_end() {
  uint8_t extra = 0;
  if (pull(&extra, 1) > 0)
    throw Error(name_ + ": holds more than the " + std::to_string(data_bytes_) +
                " bytes of data its header declares (" + std::to_string(layout_.rows) +
                " rows): a damaged file, or a gzip bomb; check the file");
}

std::vector<uint8_t> ArrayRows::read_rest() {
  check_fits_memory(name_, double(data_bytes_ - uint64_t(done_) * layout_.row_bytes),
                    "check the file");
  std::vector<uint8_t> out;
  read(layout_.rows - done_, out);
  return out;
}

ImageArray read_images(ArrayRows rows) {
  const int64_t n = rows.rows();
  const Shape shape = rows.image_shape();
  return {rows.read_rest(), n, shape};
}

}  // namespace pitrain
