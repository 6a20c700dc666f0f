#include "pitrain/dataset.h"

#include <algorithm>
#include <climits>
#include <unordered_map>

#include "pitrain/comm.h"
#include "pitrain/error.h"
#include "pitrain/h5.h"
#include "pitrain/image_files.h"
#include "pitrain/rng.h"
#include "pitrain/text.h"

namespace pitrain {

std::pair<int64_t, int64_t> slice_bounds(int64_t n, int rank, int size) {
  return {n * rank / size, n * (rank + 1) / size};
}

namespace {

// The length of the UTF-8 sequence that starts `text` at i, if it is one and encodes no control
// character (C0, DEL, C1: terminal escapes); else 0.
size_t printable_utf8_at(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return k < text.size() ? (unsigned char)text[k] : 0u; };
  const unsigned lead = byte(i);
  if (lead >= 0x20 && lead < 0x7f) return 1;
  const size_t n = lead >= 0xf5 ? 0 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;
  if (n == 0) return 0;
  unsigned code = lead & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = code << 6 | (byte(i + k) & 0x3f);
  }
  const unsigned least[] = {0, 0, 0xa0, 0x800, 0x10000};  // 2 bytes: past C1
  const bool ok = code >= least[n] && code <= 0x10ffff && !(code >= 0xd800 && code < 0xe000);
  return ok ? n : 0;
}

}  // namespace

std::string class_names_problem(const std::vector<std::string>& names) {
  if (names.size() < 2)
    return std::to_string(names.size()) + " class name(s); a classifier needs at least 2";
  if (names.size() > size_t(kMaxClasses))
    return std::to_string(names.size()) + " class names; at most " + std::to_string(kMaxClasses);
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (name.empty()) return "class name " + std::to_string(i) + " is empty";
    if (name.size() > size_t(kMaxClassNameBytes))
      return "class name " + std::to_string(i) + " has " + std::to_string(name.size()) +
             " bytes; at most " + std::to_string(kMaxClassNameBytes);
    for (size_t at = 0, n; at < name.size(); at += n)
      if ((n = printable_utf8_at(name, at)) == 0)
        return "class name " + std::to_string(i) + " ('" + escaped(name) +
               "') holds a control character or is not UTF-8";
    const auto [first, fresh] = seen.emplace(name, i);
    if (!fresh)
      return "class name '" + name + "' is given twice (labels " + std::to_string(first->second) +
             " and " + std::to_string(i) + ")";
  }
  return "";
}

namespace {

// Labels checked at once when a slice is streamed: a few MB.
constexpr int64_t kLabelRows = 1 << 20;

// Labels [first, first + count) of `labels`, each checked to name one of `classes`.
std::vector<int32_t> checked_labels(const h5::File& f, const std::string& labels, int64_t first,
                                    int64_t count, int64_t classes) {
  // Read as int64, so that a wide label is reported as it is, not as int32's clamped value.
  const auto wide = f.read_rows<int64_t>(labels, hsize_t(first), hsize_t(count));
  for (size_t i = 0; i < wide.size(); ++i)
    if (wide[i] < 0 || wide[i] >= classes)
      throw Error(f.path() + ": " + labels + " row " + std::to_string(first + int64_t(i)) +
                  " has label " + std::to_string(wide[i]) + ", outside the " +
                  std::to_string(classes) + " classes of class_names");
  return {wide.begin(), wide.end()};
}

// The slice's rows, class names and bounds, with the datasets' shapes and types checked.
RankSlice slice_of(const h5::File& f, const std::string& split, int rank, int size) {
  const std::string& path = f.path();
  const std::string images = "/" + split + "/images", labels = "/" + split + "/labels";
  RankSlice s;
  s.path = path, s.split = split;
  s.class_names = f.attr_strings("class_names");
  if (const auto problem = class_names_problem(s.class_names); !problem.empty())
    throw Error(path + ": attribute class_names: " + problem + "; prepare the file again");
  const auto idims = f.shape(images), ldims = f.shape(labels);
  // hsize_t past int64_t's range turns negative, which image_shape_of() refuses too.
  s.data.shape = image_shape_of(std::vector<int64_t>(idims.begin(), idims.end()));
  if (!image_shape_ok(s.data.shape))
    throw Error(path + ": dataset " + images + " has shape " + h5::dims_text(idims) +
                ", expected images (N,H,W) or (N,H,W,C), " + image_limits_text());
  if (f.type_class(images) != H5T_INTEGER || f.type_size(images) != 1 || f.type_signed(images))
    throw Error(path + ": dataset " + images + " must be uint8 pixels (0-255)" +
                (f.type_signed(images)
                     ? std::string(", not int8, whose negative values would read as 0; convert it")
                     : ""));
  if (ldims.size() != 1 || ldims[0] != idims[0])
    throw Error(path + ": dataset " + labels + " has shape " + h5::dims_text(ldims) +
                ", expected (" + std::to_string(idims[0]) + ",) to match " + images);
  if (f.type_class(labels) != H5T_INTEGER)
    throw Error(path + ": dataset " + labels + " must hold integers");
  s.total_rows = int64_t(idims[0]);
  if (s.total_rows == 0)
    throw Error(path + ": the " + split + " split is empty; prepare the file again with more data" +
                (split == "val" ? " or a --val-fraction above 0" : ""));
  if (s.total_rows < size)
    throw Error(path + ": " + split + " split has " + std::to_string(s.total_rows) +
                " rows, fewer than the " + std::to_string(size) +
                " ranks; use fewer ranks or more data");
  const auto [first, last] = slice_bounds(s.total_rows, rank, size);
  s.first_row = first, s.rows = last - first;
  return s;
}

}  // namespace

RankSlice load_rank_slice(const std::string& path, const std::string& split, int rank, int size,
                          int64_t memory_bytes) {
  auto f = h5::File::open_read(path);
  RankSlice s = slice_of(f, split, rank, size);
  const std::string images = "/" + split + "/images", labels = "/" + split + "/labels";
  const int64_t classes = int64_t(s.class_names.size());
  const int64_t bytes_a_row = row_bytes(s.data.shape);
  if (s.rows <= memory_bytes / bytes_a_row) {
    s.data.images = f.read_rows<uint8_t>(images, hsize_t(s.first_row), hsize_t(s.rows));
    s.data.labels = checked_labels(f, labels, s.first_row, s.rows, classes);
    return s;
  }
  hbool_t threadsafe = false;  // the next window is read on a thread of its own
  if (H5is_library_threadsafe(&threadsafe) < 0 || !threadsafe)
    throw Error(path + ": " + split + " slice of " + std::to_string(s.rows * bytes_a_row >> 20) +
                " MB is more than --data-memory lets a rank hold, and this HDF5 library is not "
                "thread-safe, which streaming needs; raise --data-memory, or use Debian's libhdf5");
  // Two windows (the one training, the one being read) fit the bound. A block is at most one of
  // the file's chunks (kDatasetChunkRows where it has none) and a quarter of a window, so that a
  // window draws its rows from at least four places in the slice.
  f.check_stored(images);
  const int64_t window_rows = std::max<int64_t>(1, memory_bytes / (2 * bytes_a_row));
  const int64_t chunk = int64_t(f.chunk_rows(images));
  s.block_rows =
      std::max<int64_t>(1, std::min(chunk > 0 ? chunk : kDatasetChunkRows, window_rows / 4));
  s.window_blocks = std::max<int64_t>(1, window_rows / s.block_rows);
  for (int64_t at = 0; at < s.rows; at += kLabelRows)
    checked_labels(f, labels, s.first_row + at, std::min(kLabelRows, s.rows - at), classes);
  return s;
}

std::string slice_text(const RankSlice& slice) {
  const auto mb = [&](int64_t rows) {
    return std::to_string((rows * row_bytes(slice.data.shape) + (1 << 19)) >> 20);
  };
  if (!slice.streamed()) return "in memory (" + mb(slice.rows) + " MB a rank)";
  const int64_t window = slice.block_rows * slice.window_blocks;
  return "streamed from the file in windows of " + std::to_string(window) + " rows (" +
         std::to_string(slice.window_blocks) + " blocks of " + std::to_string(slice.block_rows) +
         ", two held: " + mb(2 * window) + " MB a rank), shuffled within each window";
}

Split first_rows(const RankSlice& slice, int64_t n) {
  n = std::min(n, slice.rows);
  if (!slice.streamed()) {
    const Split& all = slice.data;
    return {{all.images.begin(), all.images.begin() + n * all.shape.size()},
            {all.labels.begin(), all.labels.begin() + n},
            all.shape};
  }
  auto f = h5::File::open_read(slice.path);
  const std::string group = "/" + slice.split;
  Split out;
  out.shape = slice.data.shape;
  out.images = f.read_rows<uint8_t>(group + "/images", hsize_t(slice.first_row), hsize_t(n));
  out.labels = f.read_rows<int32_t>(group + "/labels", hsize_t(slice.first_row), hsize_t(n));
  return out;
}

std::vector<unsigned long long> image_dims(int64_t n, const Shape& image) {
  std::vector<unsigned long long> dims = {(unsigned long long)n, (unsigned long long)image.h,
                                          (unsigned long long)image.w};
  if (image.c != 1) dims.push_back((unsigned long long)image.c);
  return dims;
}

void write_dataset(const std::string& path, const Split& train, const Split& val,
                   const std::vector<std::string>& class_names,
                   const std::map<std::string, std::string>& provenance) {
  auto f = h5::File::create(path);
  for (auto [name, split] : {std::pair{"train", &train}, std::pair{"val", &val}}) {
    const hsize_t n = hsize_t(split->size());
    const std::string images = std::string("/") + name + "/images";
    const std::string labels = std::string("/") + name + "/labels";
    f.create_rows<uint8_t>(images, image_dims(int64_t(n), split->shape), kDatasetChunkRows);
    f.create_rows<int32_t>(labels, {n}, kDatasetChunkRows);
    if (n == 0) continue;
    f.write_rows<uint8_t>(images, 0, n, split->images.data());
    f.write_rows<int32_t>(labels, 0, n, split->labels.data());
  }
  write_attributes(f, class_names, provenance);
}

void write_attributes(h5::File& f, const std::vector<std::string>& class_names,
                      const std::map<std::string, std::string>& provenance) {
  f.set_attr("class_names", class_names);
  for (auto& [k, v] : provenance) f.set_attr(k, v);
  f.flush();  // a full disk shows here, not in the close, whose failure nothing reports
}

void check_same_dataset(Comm& comm, const std::string& path, const std::string& split,
                        const RankSlice& slice) {
  const uint64_t rows = uint64_t(slice.total_rows);
  std::string names = shape_text(slice.data.shape) + "\n";  // the images' shape, then the names
  for (const auto& n : slice.class_names) names += n + "\n";
  // One collective where the copies agree, as they mostly do; rank 0's figures where not.
  if (comm.all_equal(hash_bytes(names.data(), names.size()) ^ splitmix64(rows))) return;
  uint64_t root_rows = rows;
  std::string root_names = names;
  comm.broadcast(&root_rows, 1);
  comm.broadcast(root_names);
  run_together(comm, [&] {
    if (rows == root_rows && names == root_names) return;
    std::vector<std::string> root;  // rank 0's class names
    for (size_t at = 0, end; (end = root_names.find('\n', at)) != std::string::npos; at = end + 1)
      root.push_back(root_names.substr(at, end - at));
    const std::string root_shape = root.empty() ? "" : root.front();
    if (!root.empty()) root.erase(root.begin());
    const auto& mine = slice.class_names;
    std::string what;
    if (shape_text(slice.data.shape) != root_shape) {
      what = "images of " + shape_text(slice.data.shape) + " against rank 0's " + root_shape;
    } else if (rows != root_rows) {
      what = std::to_string(rows) + " /" + split + " rows against rank 0's " +
             std::to_string(root_rows);
    } else if (mine.size() != root.size()) {
      what =
          std::to_string(mine.size()) + " classes against rank 0's " + std::to_string(root.size());
    } else {
      const auto i =
          size_t(std::mismatch(mine.begin(), mine.end(), root.begin()).first - mine.begin());
      what = "class " + std::to_string(i) + " named " + mine[i] + " where rank 0's copy has " +
             root[i];
    }
    throw Error(path + ": rank " + std::to_string(comm.rank()) + "'s copy has " + what +
                "; every host needs the same file: copy rank 0's to the others");
  });
}

}  // namespace pitrain
