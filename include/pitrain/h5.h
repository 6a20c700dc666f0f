// A thin RAII layer over the HDF5 C API, shared by the dataset and checkpoint code. Errors are
// thrown as pitrain::Error naming the file and object; HDF5's own error stack printing is off.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace pitrain::h5 {

// Owns one HDF5 identifier and closes it with the right H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid_t get() const { return id_; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// The HDF5 type of T in memory: one table for every element type the files hold.
template <class T>
hid_t native_type() {
  if constexpr (std::is_same_v<T, uint8_t>)
    return H5T_NATIVE_UINT8;
  else if constexpr (std::is_same_v<T, int32_t>)
    return H5T_NATIVE_INT32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return H5T_NATIVE_INT64;
  else if constexpr (std::is_same_v<T, float>)
    return H5T_NATIVE_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return H5T_NATIVE_DOUBLE;
  else
    static_assert(sizeof(T) == 0, "no HDF5 type for this element type");
}

// "(2,27,28)", "(3,)": a shape as Python prints it, for messages.
std::string dims_text(const std::vector<hsize_t>& dims);

class File {
 public:
  // Truncates an existing file, or with `exclusive` fails on one (H5F_ACC_EXCL, as O_EXCL).
  static File create(const std::string& path, bool exclusive = false);
  static File open_read(const std::string& path);
  const std::string& path() const { return path_; }
  hid_t id() const { return h_.get(); }

  // Datasets and groups; intermediate groups are created as needed.
  void create_group(const std::string& name);
  template <class T>
  void write(const std::string& name, const std::vector<hsize_t>& dims, const T* data);
  // A dataset of `dims` in chunks of `chunk_rows` rows (at most dims[0]), written a few rows at a
  // time with write_rows.
  template <class T>
  void create_rows(const std::string& name, const std::vector<hsize_t>& dims, hsize_t chunk_rows);
  template <class T>
  void write_rows(const std::string& name, hsize_t first, hsize_t count, const T* data);
  bool exists(const std::string& name) const;
  // The names in a group; none if it is absent.
  std::vector<std::string> members(const std::string& group) const;
  std::vector<hsize_t> shape(const std::string& name) const;
  H5T_class_t type_class(const std::string& name) const;
  size_t type_size(const std::string& name) const;
  bool type_signed(const std::string& name) const;
  // Error unless the dataset's filters can be decoded and the file stores the bytes it declares.
  void check_stored(const std::string& name) const;
  // Rows [first, first + count) along dimension 0, converted to T.
  template <class T>
  std::vector<T> read_rows(const std::string& name, hsize_t first, hsize_t count) const;
  // The same into `out`, which holds count rows (a streamed slice's window), without
  // check_stored: a stream checks its datasets once, not at every block it reads.
  template <class T>
  void read_rows_into(const std::string& name, hsize_t first, hsize_t count, T* out) const;
  // Rows a chunk of a chunked dataset, 0 for a contiguous one.
  hsize_t chunk_rows(const std::string& name) const;
  template <class T>
  std::vector<T> read_all(const std::string& name) const;

  // Attributes of the group or dataset `object` (the root group unless given), which must exist.
  void set_attr(const std::string& name, const std::string& value, const std::string& object = "/");
  void set_attr(const std::string& name, const std::vector<std::string>& values,
                const std::string& object = "/");
  void set_attr(const std::string& name, double value);
  // Fixed-length ASCII strings, as h5py stores numpy bytes: what Keras writes, and what every
  // Keras version reads (older ones call .decode() on each value, which h5py gives only to bytes).
  void set_bytes_attr(const std::string& name, const std::string& value, const std::string& object);
  void set_bytes_attr(const std::string& name, const std::vector<std::string>& values,
                      const std::string& object);
  bool has_attr(const std::string& name, const std::string& object = "/") const;
  std::string attr_string(const std::string& name, const std::string& object = "/") const;
  std::vector<std::string> attr_strings(const std::string& name,
                                        const std::string& object = "/") const;
  double attr_double(const std::string& name) const;

  // Pushes everything written so far to the file (before an fsync and rename).
  void flush();

 private:
  File(Handle h, std::string path) : h_(std::move(h)), path_(std::move(path)) {}
  Handle open_dataset(const std::string& name) const;
  Handle open_attr(const std::string& name, const std::string& object) const;
  void check_stored(const std::string& name, hid_t ds) const;
  // Its element count; Error naming `what`.
  uint64_t points(hid_t space, const std::string& what) const;
  Handle h_;
  std::string path_;
};

}  // namespace pitrain::h5
