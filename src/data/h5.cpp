#include "pitrain/h5.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "pitrain/error.h"
#include "pitrain/memory.h"

namespace pitrain::h5 {
namespace {

// HDF5 prints its error stack to stderr by default; we report our own one-line errors instead.
// A thread-safe HDF5 keeps that setting per thread: the stream's and the checkpoint writer's too.
// Also no clean-up of HDF5's own at exit: after an error it would close files the program left
// open while it unwinds (a full disk's half-written one) and could crash in doing so; every
// file here is closed by its owner.
void silence_hdf5() {
  static thread_local const bool done =
      (H5dont_atexit(), H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), true);
  (void)done;
}

// Selects rows [first, first + count) of the dataspace `space`; the memory space of those rows.
Handle select_rows(hid_t space, hsize_t first, hsize_t count) {
  std::vector<hsize_t> start(size_t(H5Sget_simple_extent_ndims(space)), 0), extent(start.size());
  H5Sget_simple_extent_dims(space, extent.data(), nullptr);
  start[0] = first, extent[0] = count;
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr);
  return Handle(H5Screate_simple(int(extent.size()), extent.data(), nullptr), H5Sclose);
}

}  // namespace

Handle& Handle::operator=(Handle&& o) noexcept {
  std::swap(id_, o.id_);
  std::swap(close_, o.close_);
  return *this;
}

Handle::~Handle() {
  if (id_ >= 0 && close_) close_(id_);
}

std::string dims_text(const std::vector<hsize_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

File File::create(const std::string& path, bool exclusive) {
  silence_hdf5();
  hid_t id =
      H5Fcreate(path.c_str(), exclusive ? H5F_ACC_EXCL : H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0)
    throw Error(path + ": cannot create file (" + std::strerror(errno) +
                "); check that the folder exists and is writable");
  return File(Handle(id, H5Fclose), path);
}

File File::open_read(const std::string& path) {
  silence_hdf5();
  if (!std::ifstream(path))
    throw Error(path + ": no such file (" + std::strerror(errno) + "); check the path");
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw Error(path + ": not an HDF5 file; make one with `pitrain prepare`");
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw Error(path + ": cannot open as HDF5 (damaged or truncated?)");
  return File(Handle(id, H5Fclose), path);
}

void File::create_group(const std::string& name) {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle g(H5Gcreate2(id(), name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (g.get() < 0) throw Error(path_ + ": cannot create group " + name + " (disk full?)");
}

template <class T>
void File::write(const std::string& name, const std::vector<hsize_t>& dims, const T* data) {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle ds(H5Dcreate2(id(), name.c_str(), native_type<T>(), space.get(), lcpl.get(), H5P_DEFAULT,
                       H5P_DEFAULT),
            H5Dclose);
  if (ds.get() < 0 || H5Dwrite(ds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw Error(path_ + ": cannot write dataset " + name + " (disk full?)");
}

template <class T>
void File::create_rows(const std::string& name, const std::vector<hsize_t>& dims,
                       hsize_t chunk_rows) {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose), dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  std::vector<hsize_t> chunk = dims;
  chunk[0] = std::max<hsize_t>(1, std::min(chunk_rows, dims[0]));
  H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data());
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle ds(H5Dcreate2(id(), name.c_str(), native_type<T>(), space.get(), lcpl.get(), dcpl.get(),
                       H5P_DEFAULT),
            H5Dclose);
  if (ds.get() < 0) throw Error(path_ + ": cannot create dataset " + name + " (disk full?)");
}

template <class T>
void File::write_rows(const std::string& name, hsize_t first, hsize_t count, const T* data) {
  Handle ds = open_dataset(name);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const Handle mem = select_rows(space.get(), first, count);
  if (H5Dwrite(ds.get(), native_type<T>(), mem.get(), space.get(), H5P_DEFAULT, data) < 0)
    throw Error(path_ + ": cannot write rows of " + name + " (disk full?)");
}

bool File::exists(const std::string& name) const {
  // H5Lexists needs each parent group to exist, so walk the path.
  size_t pos = 0;
  while ((pos = name.find('/', pos + 1)) != std::string::npos)
    if (H5Lexists(id(), name.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  return H5Lexists(id(), name.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::string> File::members(const std::string& group) const {
  std::vector<std::string> names;
  if (!exists(group)) return names;
  Handle g(H5Gopen2(id(), group.c_str(), H5P_DEFAULT), H5Gclose);
  H5G_info_t info;
  if (g.get() < 0 || H5Gget_info(g.get(), &info) < 0)
    throw Error(path_ + ": " + group + " is not a readable group");
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len =
        H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len < 0) throw Error(path_ + ": cannot read the names in " + group);
    std::string name(size_t(len) + 1, '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(size_t(len));
    names.push_back(name);
  }
  return names;
}

Handle File::open_dataset(const std::string& name) const {
  if (!exists(name)) throw Error(path_ + ": dataset " + name + " is missing");
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (ds.get() < 0) throw Error(path_ + ": " + name + " is not a readable dataset");
  return ds;
}

std::vector<hsize_t> File::shape(const std::string& name) const {
  Handle ds = open_dataset(name);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  std::vector<hsize_t> dims(H5Sget_simple_extent_ndims(space.get()));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

H5T_class_t File::type_class(const std::string& name) const {
  Handle ds = open_dataset(name);
  Handle t(H5Dget_type(ds.get()), H5Tclose);
  return H5Tget_class(t.get());
}

size_t File::type_size(const std::string& name) const {
  Handle ds = open_dataset(name);
  Handle t(H5Dget_type(ds.get()), H5Tclose);
  return H5Tget_size(t.get());
}

void File::check_stored(const std::string& name, hid_t ds) const {
  Handle dcpl(H5Dget_create_plist(ds), H5Pclose);
  const int filters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    char filter[64] = "";
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), unsigned(i), &flags, &nvalues, nullptr,
                                           sizeof filter, filter, &config);
    if (H5Zfilter_avail(id) <= 0)
      throw Error(path_ + ": " + name + " is compressed with the filter '" + filter +
                  "' (HDF5 filter " + std::to_string(id) +
                  "), which this HDF5 library cannot decode; write it uncompressed or with gzip");
  }
  Handle space(H5Dget_space(ds), H5Sclose), type(H5Dget_type(ds), H5Tclose);
  const uint64_t declared = checked_mul<uint64_t>(
      points(space.get(), name), H5Tget_size(type.get()), path_ + ": " + name + "'s bytes");
  // Unwritten chunks read as zeros: a file that stores less than its shape declares is not data.
  // Compressed, deflate packs at most about 1032:1.
  const double stored = double(H5Dget_storage_size(ds)) * (filters > 0 ? 1032.0 : 1.0);
  if (stored < double(declared))
    throw Error(path_ + ": " + name + " declares " + std::to_string(declared) +
                " bytes but the file stores only " + std::to_string(H5Dget_storage_size(ds)) +
                " (a sparse or truncated dataset); write the file again");
}

void File::check_stored(const std::string& name) const {
  check_stored(name, open_dataset(name).get());
}

uint64_t File::points(hid_t space, const std::string& what) const {
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0) throw Error(path_ + ": cannot read the shape of " + what + " (damaged file?)");
  return uint64_t(n);
}

bool File::type_signed(const std::string& name) const {
  Handle ds = open_dataset(name);
  Handle t(H5Dget_type(ds.get()), H5Tclose);
  return H5Tget_sign(t.get()) == H5T_SGN_2;
}

namespace {

// Values in `count` rows of the dataset (rows from `first` on must exist).
uint64_t row_values(const std::string& path, const std::string& name, hid_t space, hsize_t first,
                    hsize_t count) {
  std::vector<hsize_t> dims(size_t(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  if (dims.empty() || first + count > dims[0])
    throw Error(path + ": " + name + " has fewer rows than requested");
  uint64_t n = count;
  for (size_t d = 1; d < dims.size(); ++d)
    n = checked_mul<uint64_t>(n, dims[d], path + ": " + name + "'s shape");
  return n;
}

}  // namespace

template <class T>
std::vector<T> File::read_rows(const std::string& name, hsize_t first, hsize_t count) const {
  Handle ds = open_dataset(name);
  check_stored(name, ds.get());
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const uint64_t n = row_values(path_, name, space.get(), first, count);
  check_fits_memory(path_ + ": " + name,
                    double(checked_mul<uint64_t>(n, sizeof(T), path_ + ": " + name + "'s bytes")),
                    "use more ranks, on more machines");
  std::vector<T> out;
  out.resize(static_cast<size_t>(n));  // fits: check_fits_memory bounds it by PTRDIFF_MAX
  read_rows_into(name, first, count, out.data());
  return out;
}

template <class T>
void File::read_rows_into(const std::string& name, hsize_t first, hsize_t count, T* out) const {
  silence_hdf5();  // a streamed slice reads on a thread of its own
  Handle ds = open_dataset(name);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  if (row_values(path_, name, space.get(), first, count) == 0) return;
  const Handle mem = select_rows(space.get(), first, count);
  if (H5Dread(ds.get(), native_type<T>(), mem.get(), space.get(), H5P_DEFAULT, out) < 0)
    throw Error(path_ + ": cannot read " + name + " (damaged or truncated file?)");
}

hsize_t File::chunk_rows(const std::string& name) const {
  Handle ds = open_dataset(name);
  Handle plist(H5Dget_create_plist(ds.get()), H5Pclose);
  if (H5Pget_layout(plist.get()) != H5D_CHUNKED) return 0;
  std::vector<hsize_t> chunk(size_t(H5Pget_chunk(plist.get(), 0, nullptr)));
  if (chunk.empty()) return 0;
  H5Pget_chunk(plist.get(), int(chunk.size()), chunk.data());
  return chunk[0];
}

template <class T>
std::vector<T> File::read_all(const std::string& name) const {
  auto dims = shape(name);
  return read_rows<T>(name, 0, dims.empty() ? 0 : dims[0]);
}

namespace {

Handle string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

// "attribute NAME", or "attribute NAME of OBJECT" when it is not the root group's.
std::string attr_label(const std::string& name, const std::string& object) {
  return "attribute " + name + (object == "/" ? "" : " of " + object);
}

// An attribute of `object`; a zero-length one needs no data and gets none (HDF5 refuses a null
// buffer).
void write_attr(hid_t file, const std::string& path, const std::string& object,
                const std::string& name, hid_t type, hid_t space, const void* data, bool empty) {
  Handle loc(H5Oopen(file, object.c_str(), H5P_DEFAULT), H5Oclose);
  if (loc.get() < 0)
    throw Error(path + ": cannot write " + attr_label(name, object) + " (no such object)");
  if (H5Aexists(loc.get(), name.c_str()) > 0) H5Adelete(loc.get(), name.c_str());
  Handle a(H5Acreate2(loc.get(), name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (a.get() < 0 || (!empty && H5Awrite(a.get(), type, data) < 0))
    throw Error(path + ": cannot write " + attr_label(name, object));
}

// Variable-length UTF-8 strings, or (fixed) null-padded ASCII ones as long as the longest value.
void write_string_attr(hid_t file, const std::string& path, const std::string& object,
                       const std::string& name, const std::vector<std::string>& values, bool scalar,
                       bool fixed = false) {
  hsize_t n = values.size();
  Handle space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr), H5Sclose);
  if (!fixed) {
    std::vector<const char*> ptrs;
    for (auto& v : values) ptrs.push_back(v.c_str());
    Handle t = string_type();
    write_attr(file, path, object, name, t.get(), space.get(), ptrs.data(), values.empty());
    return;
  }
  size_t len = 1;
  for (auto& v : values) len = std::max(len, v.size());
  std::vector<char> buf(values.size() * len, '\0');
  for (size_t i = 0; i < values.size(); ++i)
    std::copy(values[i].begin(), values[i].end(), buf.begin() + i * len);
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), len);
  H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
  write_attr(file, path, object, name, t.get(), space.get(), buf.data(), values.empty());
}

}  // namespace

void File::set_attr(const std::string& name, const std::string& value, const std::string& object) {
  write_string_attr(id(), path_, object, name, {value}, true);
}

void File::set_attr(const std::string& name, const std::vector<std::string>& values,
                    const std::string& object) {
  write_string_attr(id(), path_, object, name, values, false);
}

void File::set_bytes_attr(const std::string& name, const std::string& value,
                          const std::string& object) {
  write_string_attr(id(), path_, object, name, {value}, true, true);
}

void File::set_bytes_attr(const std::string& name, const std::vector<std::string>& values,
                          const std::string& object) {
  write_string_attr(id(), path_, object, name, values, false, true);
}

void File::set_attr(const std::string& name, double value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  write_attr(id(), path_, "/", name, H5T_NATIVE_DOUBLE, space.get(), &value, false);
}

bool File::has_attr(const std::string& name, const std::string& object) const {
  return exists(object) && H5Aexists_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

Handle File::open_attr(const std::string& name, const std::string& object) const {
  if (!has_attr(name, object)) throw Error(path_ + ": " + attr_label(name, object) + " is missing");
  return Handle(H5Aopen_by_name(id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
}

std::vector<std::string> File::attr_strings(const std::string& name,
                                            const std::string& object) const {
  const std::string label = attr_label(name, object);
  Handle a = open_attr(name, object);
  Handle ft(H5Aget_type(a.get()), H5Tclose);
  if (H5Tget_class(ft.get()) != H5T_STRING) throw Error(path_ + ": " + label + " is not a string");
  Handle space(H5Aget_space(a.get()), H5Sclose);
  const bool variable = H5Tis_variable_str(ft.get()) > 0;
  // Each value is a pointer (variable-length strings) or `len` bytes: counts from the file,
  // multiplied in 64 bits and bounded by the memory before any size_t holds them (32 bits on a
  // 32-bit Pi).
  const uint64_t points = this->points(space.get(), label),
                 len = variable ? sizeof(char*) : H5Tget_size(ft.get());
  check_fits_memory(path_ + ": " + label,
                    double(checked_mul<uint64_t>(points, len, path_ + ": " + label + "'s bytes")),
                    "check the file");
  const size_t n = size_t(points), width = size_t(len);
  std::vector<std::string> out;
  if (n == 0) return out;
  if (variable) {
    std::vector<char*> ptrs(n);
    Handle t = string_type();
    // HDF5 converts no charset: h5py writes bytes as ASCII.
    H5Tset_cset(t.get(), H5Tget_cset(ft.get()));
    if (H5Aread(a.get(), t.get(), ptrs.data()) < 0) throw Error(path_ + ": cannot read " + label);
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Dvlen_reclaim(t.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {  // fixed-length strings, as h5py writes numpy 'S' arrays
    std::vector<char> buf(n * width);
    if (H5Aread(a.get(), ft.get(), buf.data()) < 0) throw Error(path_ + ": cannot read " + label);
    for (size_t i = 0; i < n; ++i)
      out.emplace_back(std::string(&buf[i * width], strnlen(&buf[i * width], width)));
  }
  return out;
}

std::string File::attr_string(const std::string& name, const std::string& object) const {
  auto v = attr_strings(name, object);
  if (v.size() != 1)
    throw Error(path_ + ": " + attr_label(name, object) + " should hold one string");
  return v[0];
}

double File::attr_double(const std::string& name) const {
  Handle a = open_attr(name, "/");
  Handle space(H5Aget_space(a.get()), H5Sclose);
  const hssize_t values = H5Sget_simple_extent_npoints(space.get());
  if (values != 1)  // H5Aread writes every value: an array must not land on one double
    throw Error(path_ + ": attribute " + name + " holds " + std::to_string(values) +
                " values, expected one number");
  double v = 0;
  if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) < 0)
    throw Error(path_ + ": attribute " + name + " is not a number");
  return v;
}

void File::flush() {
  if (H5Fflush(id(), H5F_SCOPE_GLOBAL) < 0) throw Error(path_ + ": flush failed (disk full?)");
}

#define PITRAIN_H5_INSTANTIATE(T)                                                               \
  template void File::write<T>(const std::string&, const std::vector<hsize_t>&, const T*);      \
  template std::vector<T> File::read_rows<T>(const std::string&, hsize_t, hsize_t) const;       \
  template void File::read_rows_into<T>(const std::string&, hsize_t, hsize_t, T*) const;        \
  template std::vector<T> File::read_all<T>(const std::string&) const;                          \
  template void File::create_rows<T>(const std::string&, const std::vector<hsize_t>&, hsize_t); \
  template void File::write_rows<T>(const std::string&, hsize_t, hsize_t, const T*);
PITRAIN_H5_INSTANTIATE(uint8_t)
PITRAIN_H5_INSTANTIATE(int32_t)
PITRAIN_H5_INSTANTIATE(int64_t)
PITRAIN_H5_INSTANTIATE(float)
PITRAIN_H5_INSTANTIATE(double)

}  // namespace pitrain::h5
