// The .npy and IDX readers, prepare's round trip and the rank-slice loader.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

#include "helpers.h"
#include "pitrain/checkpoint.h"
#include "pitrain/dataset.h"
#include "pitrain/error.h"
#include "pitrain/h5.h"
#include "pitrain/memory.h"
#include "pitrain/paths.h"
#include "pitrain/prepare.h"

using namespace pitrain;
using pitrain::test::TempDir;

namespace {

std::vector<uint8_t> pixels(int64_t rows, uint8_t base) {
  std::vector<uint8_t> p(size_t(rows) * kImagePixels);
  for (size_t i = 0; i < p.size(); ++i) p[i] = uint8_t(base + i % 7);
  return p;
}

const std::string kDict = "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 784), }";

std::vector<uint8_t> idx_bytes(std::vector<uint32_t> dims, const std::vector<uint8_t>& data,
                               uint8_t type = 0x08) {
  std::vector<uint8_t> b = {0, 0, type, uint8_t(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

void require_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL("expected an error containing: " << fragment);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("npy: versions 1 to 3 and both shapes parse to the same pixels") {
  const auto data = pixels(3, 10);
  for (int version : {1, 2, 3}) {
    auto a = parse_npy_images("x.npy", test::npy_bytes(kDict, data, version));
    CHECK(a.rows == 3);
    CHECK(a.pixels == data);
  }
  auto b = parse_npy_images(
      "x.npy",
      test::npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 28, 28), }", data));
  CHECK(b.pixels == data);
}

TEST_CASE("npy: malformed files are rejected with the file name and the reason") {
  const auto data = pixels(3, 0);
  auto bad = [&](const std::vector<uint8_t>& bytes, const std::string& why) {
    require_error([&] { parse_npy_images("bad.npy", bytes); }, "bad.npy: ");
    require_error([&] { parse_npy_images("bad.npy", bytes); }, why);
  };
  auto bytes = test::npy_bytes(kDict, data);
  bytes[1] = 'X';
  bad(bytes, "bad magic");
  bad(test::npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 784), }", data),
      "dtype '<f4'");
  bad(test::npy_bytes("{'descr': '|u1', 'fortran_order': True, 'shape': (3, 784), }", data),
      "Fortran order");
  bad(test::npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 783), }", data),
      "shape (3, 783)");
  bad(test::npy_bytes(kDict, std::vector<uint8_t>(data.begin(), data.end() - 5)), "truncated data");
  auto longer = data;
  longer.push_back(1);
  bad(test::npy_bytes(kDict, longer),
      "holds more than the 2352 bytes of data its header declares (3 rows)");
  bad({0x93, 'N', 'U', 'M', 'P', 'Y', 9, 0, 0, 0}, "unsupported .npy version 9");
  require_error([] { read_npy_images("/nonexistent/x.npy"); }, "/nonexistent/x.npy: cannot open");
}

TEST_CASE("idx: gzip and plain files; malformed headers are rejected") {
  TempDir dir;
  const auto data = pixels(2, 3);
  write_gzip(dir / "img.gz", idx_bytes({2, 28, 28}, data));
  test::write_bytes(dir / "img", idx_bytes({2, 28, 28}, data));
  for (auto name : {"img.gz", "img"}) {
    auto a = read_idx_images(dir / name);
    CHECK(a.rows == 2);
    CHECK(a.pixels == data);
  }
  test::write_bytes(dir / "lab", idx_bytes({3}, {0, 1, 2}));
  CHECK(read_idx_labels(dir / "lab") == std::vector<uint8_t>{0, 1, 2});
  test::write_bytes(dir / "short",
                    idx_bytes({2, 28, 28}, std::vector<uint8_t>(data.begin(), data.end() - 1)));
  require_error([&] { read_idx_images(dir / "short"); },
                "short: truncated data: its header declares 2 rows (1568 bytes of data) but the "
                "file holds 1567");
  test::write_bytes(dir / "float", idx_bytes({3}, std::vector<uint8_t>(12), 0x0D));
  require_error([&] { read_idx_labels(dir / "float"); }, "expected 0x08");
  test::write_bytes(dir / "shape",
                    idx_bytes({2, 27, 28, 3}, std::vector<uint8_t>(2 * 27 * 28 * 3)));
  require_error([&] { read_idx_images(dir / "shape"); }, "expected (N,H,W)");
  test::write_bytes(dir / "junk", {1, 2, 3, 4, 5});
  require_error([&] { read_idx_images(dir / "junk"); }, "not an IDX file");
}

TEST_CASE("checked_mul: the product, or an Error naming the thing when it overflows") {
  CHECK(checked_mul<uint64_t>(uint64_t(1) << 32, uint64_t(1) << 31, "x") == uint64_t(1) << 63);
  CHECK(checked_mul<int64_t>(-3, 7, "x") == -21);
  require_error(
      [] { checked_mul<uint64_t>(uint64_t(1) << 32, uint64_t(1) << 32, "f.npy: its shape"); },
      "f.npy: its shape: 4294967296 x 4294967296 overflows a 64-bit count (a damaged or hostile "
      "file); check the file");
  require_error([] { checked_mul<uint32_t>(65536, 65536, "f.h5: attribute a"); },
                "f.h5: attribute a: 65536 x 65536 overflows a 32-bit count");
  require_error([] { checked_mul<int64_t>(INT64_MAX, 2, "x"); }, "overflows a 64-bit count");
}

TEST_CASE("sizes past 2^31 are computed without wrapping (32-bit Pis: size_t is 32 bits)") {
  // A .npy v2 header length of 2^32 - 8: offset + length wraps a 32-bit size_t to 4.
  std::vector<uint8_t> npy = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xF8, 0xFF, 0xFF, 0xFF};
  npy.resize(64, ' ');
  require_error([&] { parse_npy_images("long.npy", npy); }, "long.npy: truncated header");
  // IDX images 2^28 x 28 x 28: 49 x 2^32 bytes, which a 32-bit size_t wraps to 0: the 0 there are.
  require_error(
      [] {
        ArrayRows rows("wrap", idx_bytes({1u << 28, 28, 28}, {}), idx_image_layout);
        std::vector<uint8_t> batch;
        rows.read(1, batch);
      },
      "wrap: truncated data: its header declares 268435456 rows (210453397504 bytes of data) but "
      "the file holds 0");
  // Three dimensions of 2^25 declare 2^75 bytes, which wraps 64 bits to 0: refused as an overflow.
  require_error(
      [] {
        parse_idx_images("huge", idx_bytes({1u << 25, 1u << 25, 1u << 25}, {}));
      },
      "huge: the IDX header's dimensions: 1125899906842624 x 33554432 overflows a 64-bit count");
  // A header's count that fits 64 bits but no memory: refused before a byte of data is held.
  TempDir dir;
  test::write_bytes(
      dir / "huge.npy",
      test::npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (999999999999, 784), }",
                      {}));
  require_error([&] { read_npy_images(dir / "huge.npy"); },
                "huge.npy needs 7.84e+05 GB a rank, more than");
  // A rank slice past 2 GiB does not fit a 32-bit process's address space, whatever memory the
  // machine has (reading it would wrap the size_t of the buffer); past 2^63 bytes neither does a
  // 64-bit one.
  require_error(
      [] { check_fits_memory("slice", double(PTRDIFF_MAX) + double(1 << 20), "use more ranks"); },
      "bit process can address");
  // Row offsets of a 3-billion-row split (uint8 rows would pass 2 GiB long before).
  CHECK(slice_bounds(3'000'000'000, 1, 2) ==
        std::pair<int64_t, int64_t>{1'500'000'000, 3'000'000'000});
  CHECK(slice_bounds(int64_t(1) << 40, 3, 4).first == int64_t(3) << 38);
}

TEST_CASE(
    "ArrayRows: rows a batch at a time, gzip or plain, the same as the whole; the end checked") {
  TempDir dir;
  const auto data = pixels(2500, 9);
  const std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (2500, 784), }";
  write_gzip(dir / "rows.npy", test::npy_bytes(dict, data));
  test::write_bytes(dir / "plain.npy", test::npy_bytes(dict, data));
  for (const char* name : {"rows.npy", "plain.npy"}) {
    ArrayRows rows(dir / name, npy_image_layout);
    CHECK(rows.rows() == 2500);
    std::vector<uint8_t> all, batch;
    std::vector<int64_t> sizes;
    for (int64_t n; (n = rows.read(1000, batch)) > 0; batch.clear()) {
      CHECK(batch.size() == size_t(n) * kImagePixels);
      all.insert(all.end(), batch.begin(), batch.end());
      sizes.push_back(n);
    }
    CHECK(sizes == std::vector<int64_t>{1000, 1000, 500});
    CHECK(all == data);
  }
  // Found by the read that reaches them: data ending early, and data going on past the last row.
  auto short_data = data;
  short_data.resize(data.size() - 1);
  write_gzip(dir / "short.npy", test::npy_bytes(dict, short_data));
  auto long_data = data;
  long_data.push_back(0);
  write_gzip(dir / "long.npy", test::npy_bytes(dict, long_data));
  for (const auto& [name, why] :
       {std::pair{"short.npy",
                  "truncated data: its header declares 2500 rows (1960000 bytes of data) but the "
                  "file holds 1959999"},
        std::pair{"long.npy",
                  "holds more than the 1960000 bytes of data its header declares (2500 rows)"}}) {
    ArrayRows rows(dir / name, npy_image_layout);
    std::vector<uint8_t> batch;
    CHECK(rows.read(2000, batch) == 2000);
    require_error([&] { rows.read(1000, batch); }, dir / name + ": " + why);
  }
}

TEST_CASE("class lists come from a,b,c or from a file") {
  TempDir dir;
  std::ofstream(dir / "list.txt") << "# fruit\napple\n banana \n\ncherry  # red\n";
  CHECK(parse_class_list(dir / "list.txt") ==
        std::vector<std::string>{"apple", "banana", "cherry"});
  CHECK(parse_class_list("a,b") == std::vector<std::string>{"a", "b"});
  CHECK_THROWS_AS(parse_class_list(","), UsageError);
}

namespace {

// Three classes of distinct images: every image is unique, so rows can be traced through prepare.
void write_class_files(const TempDir& dir) {
  for (int c = 0; c < 3; ++c) {
    const int rows = 20 + 5 * c;
    std::vector<uint8_t> data(size_t(rows) * kImagePixels, 0);
    for (int r = 0; r < rows; ++r)
      data[size_t(r) * kImagePixels] = uint8_t(c), data[size_t(r) * kImagePixels + 1] = uint8_t(r);
    const std::string dict =
        "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", 784), }";
    test::write_bytes(dir / ("c" + std::to_string(c) + ".npy"), test::npy_bytes(dict, data));
  }
}

std::multiset<std::pair<int, int>> image_ids(const Split& s) {
  std::multiset<std::pair<int, int>> ids;
  for (int64_t i = 0; i < s.size(); ++i) {
    // Label travels with its image.
    CHECK(int(s.images[size_t(i) * kImagePixels]) == s.labels[size_t(i)]);
    ids.insert({s.images[size_t(i) * kImagePixels], s.images[size_t(i) * kImagePixels + 1]});
  }
  return ids;
}

}  // namespace

// In memory, and through bucket files (10 KB: buckets of about three drawings).
TEST_CASE(
    "prepare: per-class counts, nothing lost or duplicated, same seed same file, in memory or "
    "through buckets") {
  for (int64_t memory : {kDefaultPrepareMemory, int64_t(10) << 10}) {
    TempDir dir;
    write_class_files(dir);
    PrepareOptions o;
    o.memory = memory;
    o.npy_dir = dir.path;
    o.classes = {"c0", "c1", "c2"};
    o.max_per_class = 24;  // c0 has 20, c1 25, c2 30: the first 24 of the last two
    o.seed = 7;
    o.out = dir / "a.h5";
    const auto counts = prepare_dataset(o);
    REQUIRE(counts.size() == 3);
    CHECK(counts[0].train + counts[0].val == 20);
    CHECK(counts[1].train + counts[1].val == 24);
    CHECK(counts[2].train + counts[2].val == 24);
    auto train = load_rank_slice(o.out, "train", 0, 1), val = load_rank_slice(o.out, "val", 0, 1);
    CHECK(val.data.size() == 7);  // round(68 * 0.1)
    CHECK(train.class_names == o.classes);
    auto ids = image_ids(train.data);
    for (auto id : image_ids(val.data)) ids.insert(id);
    std::multiset<std::pair<int, int>> expected;
    for (int c = 0; c < 3; ++c)
      for (int r = 0; r < std::min(24, 20 + 5 * c); ++r) expected.insert({c, r});
    CHECK(ids == expected);
    o.out = dir / "b.h5";
    prepare_dataset(o);
    CHECK(load_rank_slice(dir / "b.h5", "train", 0, 1).data.images == train.data.images);
    o.seed = 8, o.out = dir / "c.h5";
    prepare_dataset(o);
    CHECK(load_rank_slice(dir / "c.h5", "train", 0, 1).data.images != train.data.images);
    auto f = h5::File::open_read(dir / "a.h5");
    CHECK(f.attr_string("seed") == "7");
    CHECK(f.attr_string("source").find("CC BY 4.0") != std::string::npos);
    size_t files = 0;  // the class files and the three outputs: no bucket file left behind
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path)) ++files;
    CHECK(files == 6);
  }
}

TEST_CASE("prepare: IDX train and test sets become /train and /val") {
  TempDir dir;
  test::write_bytes(dir / "train-images-idx3-ubyte", idx_bytes({4, 28, 28}, pixels(4, 0)));
  test::write_bytes(dir / "train-labels-idx1-ubyte", idx_bytes({4}, {0, 1, 2, 1}));
  write_gzip(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({2, 28, 28}, pixels(2, 0)));
  write_gzip(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({2}, {2, 0}));
  PrepareOptions o;
  o.idx_dir = dir.path;
  o.classes = {"a", "b", "c"};
  o.out = dir / "d.h5";
  const auto counts = prepare_dataset(o);
  CHECK(counts[1].train == 2);
  CHECK(counts[2].val == 1);
  o.classes = {"a", "b"};
  require_error([&] { prepare_dataset(o); }, "label 2 but only 2 class names");
}

TEST_CASE("temp names: those temp_path_beside makes are its own, no other file's") {
  const std::string path = "/runs/m.h5";
  const std::string made = std::filesystem::path(temp_path_beside(path)).filename().string();
  CHECK(is_temp_name_of(made, path));
  CHECK(is_temp_name_of("m.h5.tmp.123.0123456789abcdef", path));
  for (const char* other :
       {"m.h5.tmp.notes", "m.h5.tmp.123.0123456789abcde", "m.h5.tmp.12x.0123456789abcdef",
        "m.h5.tmp.123.0123456789ABCDEF", "m.h5.tmp..0123456789abcdef", "m.h5",
        "n.h5.tmp.123.0123456789abcdef", "m.h5.tmp.123.0123456789abcdef.keep"})
    CHECK_FALSE(is_temp_name_of(other, path));
}

TEST_CASE("class names: printable UTF-8, bounded, each once") {
  CHECK(class_names_problem({"apple", "hot dog", "caf\xc3\xa9", "\xe6\xa2\xa8"}).empty());
  CHECK(class_names_problem({"a\x1b[2J", "b"}).find("('a\\x1b[2J') holds a control character") !=
        std::string::npos);
  CHECK_FALSE(class_names_problem({"a\xc2\x9b", "b"}).empty());         // C1 CSI
  CHECK_FALSE(class_names_problem({"caf\xe9", "b"}).empty());           // Latin-1
  CHECK_FALSE(class_names_problem({"\xc0\xaf", "b"}).empty());          // overlong '/'
  CHECK_FALSE(class_names_problem({"\xed\xa0\x80", "b"}).empty());      // a surrogate
  CHECK_FALSE(class_names_problem({"\xf5\x80\x80\x80", "b"}).empty());  // past U+10FFFF
  CHECK_FALSE(class_names_problem({std::string(kMaxClassNameBytes + 1, 'a'), "b"}).empty());
  CHECK(class_names_problem({std::string(kMaxClassNameBytes, 'a'), "b"}).empty());
  std::vector<std::string> many;
  for (int i = 0; i <= kMaxClasses; ++i) many.push_back(std::to_string(i));
  CHECK(class_names_problem(many).find("at most") != std::string::npos);
  many.pop_back();
  CHECK(class_names_problem(many).empty());
  many.back() = "7";
  CHECK(class_names_problem(many) == "class name '7' is given twice (labels 7 and 65535)");
}

TEST_CASE("slices for P = 1..5 cover every row exactly once, sizes within one") {
  for (int64_t n : {1, 7, 100, 46750})
    for (int p = 1; p <= 5; ++p) {
      int64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < p; ++r) {
        auto [first, last] = slice_bounds(n, r, p);
        CHECK(first == next);
        next = last;
        smallest = std::min(smallest, last - first), largest = std::max(largest, last - first);
      }
      CHECK(next == n);
      CHECK(largest - smallest <= 1);
    }
}

TEST_CASE("load_rank_slice reads exactly its rows and validates the file") {
  TempDir dir;
  const auto train = test::synthetic_split(50, 4, 3), val = test::synthetic_split(10, 4, 4);
  write_dataset(dir / "d.h5", train, val, test::class_names(4), {});
  for (int p = 1; p <= 5; ++p)
    for (int r = 0; r < p; ++r) {
      auto s = load_rank_slice(dir / "d.h5", "train", r, p);
      auto [first, last] = slice_bounds(50, r, p);
      CHECK(s.first_row == first);
      CHECK(s.data.labels ==
            std::vector<int32_t>(train.labels.begin() + first, train.labels.begin() + last));
      CHECK(s.data.images == std::vector<uint8_t>(train.images.begin() + first * kImagePixels,
                                                  train.images.begin() + last * kImagePixels));
    }
  require_error([&] { load_rank_slice(dir / "d.h5", "val", 0, 11); }, "fewer than the 11 ranks");
  require_error([&] { load_rank_slice(dir / "missing.h5", "val", 0, 1); },
                "missing.h5: no such file");
  test::write_bytes(dir / "text.h5", {'h', 'i'});
  require_error([&] { load_rank_slice(dir / "text.h5", "val", 0, 1); }, "not an HDF5 file");
  write_dataset(dir / "few.h5", train, val, test::class_names(3), {});
  require_error([&] { load_rank_slice(dir / "few.h5", "train", 0, 1); },
                "outside the 3 classes of class_names");
  {
    auto f = h5::File::create(dir / "shape.h5");  // 5 channels: no image pitrain takes
    std::vector<uint8_t> img(2 * 27 * 28 * 5);
    std::vector<int32_t> lab(2);
    f.write<uint8_t>("/train/images", {2, 27, 28, 5}, img.data());
    f.write<int32_t>("/train/labels", {2}, lab.data());
    f.set_attr("class_names", std::vector<std::string>{"a", "b"});
  }
  require_error([&] { load_rank_slice(dir / "shape.h5", "train", 0, 1); },
                "/train/images has shape (2,27,28,5), expected images (N,H,W) or (N,H,W,C), sides "
                "up to 4096, up to 4 channels");
  require_error([&] { load_rank_slice(dir / "shape.h5", "val", 0, 1); },
                "dataset /val/images is missing");
}

// Rows whose first pixels spell their index, so that a batch tells which rows it holds.
Split numbered_split(int64_t n, int classes) {
  Split s;
  s.images.assign(size_t(n) * kImagePixels, 0);
  s.labels.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int b = 0; b < 3; ++b)
      s.images[size_t(i) * kImagePixels + size_t(b)] = uint8_t(i >> (8 * b));
    s.labels[size_t(i)] = int32_t(i % classes);
  }
  return s;
}

// The row indices of a batch of numbered rows, checking each label against its index.
std::vector<int64_t> row_indices(const Batch& b, int classes) {
  std::vector<int64_t> out;
  for (int i = 0; i < b.n; ++i) {
    const float* x = b.x + int64_t(i) * kImagePixels;
    int64_t index = 0;
    for (int k = 0; k < 3; ++k) index |= int64_t(std::lround(x[k] * 255)) << (8 * k);
    CHECK(b.y[i] == int32_t(index % classes));
    out.push_back(index);
  }
  return out;
}

// An epoch's rows from `first` on, batch by batch.
std::vector<std::vector<int64_t>> epoch_batches(BatchLoader& loader, uint64_t seed, int64_t epoch,
                                                int64_t steps, int64_t first, int classes) {
  loader.reset_shuffled(seed, 0, epoch, steps, first);
  std::vector<std::vector<int64_t>> out;
  while (loader.has_next()) out.push_back(row_indices(loader.next(), classes));
  return out;
}

TEST_CASE(
    "a streamed slice: every row once an epoch, in windows of blocks in a seeded order, and a "
    "resume mid-epoch reads on as the uninterrupted epoch") {
  TempDir dir;
  const int classes = 5;
  const int64_t n = 1000;
  write_dataset(dir / "d.h5", numbered_split(n, classes), numbered_split(40, classes),
                test::class_names(classes), {});
  // 40 KB: windows of 24 rows in blocks of 6, the 167 blocks' rows read again every epoch.
  const RankSlice slice = load_rank_slice(dir / "d.h5", "train", 0, 1, 40 << 10);
  REQUIRE(slice.streamed());
  CHECK(slice.block_rows == 6);
  CHECK(slice.window_blocks == 4);
  CHECK(slice.data.images.empty());
  CHECK(first_rows(slice, 7).images == std::vector<uint8_t>(numbered_split(7, classes).images));
  BatchLoader loader(slice, 25);
  const auto epoch1 = epoch_batches(loader, 3, 1, 40, 0, classes);
  std::vector<int64_t> seen;
  for (const auto& b : epoch1) seen.insert(seen.end(), b.begin(), b.end());
  std::vector<int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  CHECK(sorted == all);  // every row once
  // A window's rows come from blocks all over the slice, and in a shuffled order.
  const std::vector<int64_t> window(seen.begin(), seen.begin() + 24);
  CHECK(*std::max_element(window.begin(), window.end()) -
            *std::min_element(window.begin(), window.end()) >
        100);
  CHECK_FALSE(std::is_sorted(window.begin(), window.end()));
  // A pure function of the seed and the epoch.
  CHECK(epoch_batches(loader, 3, 1, 40, 0, classes) == epoch1);
  CHECK(epoch_batches(loader, 3, 2, 40, 0, classes) != epoch1);
  CHECK(epoch_batches(loader, 4, 1, 40, 0, classes) != epoch1);
  // Resumed at batch 13 (mid-window), and at the start of the last window.
  for (int64_t first : {13, 39}) {
    BatchLoader resumed(slice, 25);
    CHECK(epoch_batches(resumed, 3, 1, 40, first, classes) ==
          std::vector<std::vector<int64_t>>(epoch1.begin() + first, epoch1.end()));
  }
  // Longer than a pass: the second pass starts over with every row.
  const auto longer = epoch_batches(loader, 3, 1, 48, 0, classes);
  CHECK(std::vector<std::vector<int64_t>>(longer.begin(), longer.begin() + 40) == epoch1);
  std::set<int64_t> second;
  for (size_t b = 40; b < longer.size(); ++b) second.insert(longer[b].begin(), longer[b].end());
  CHECK(second.size() == 200);
  // In order: the file's order, the last batch short; as the slice in memory gives it.
  const RankSlice in_memory = load_rank_slice(dir / "d.h5", "train", 0, 1);
  REQUIRE_FALSE(in_memory.streamed());
  for (const RankSlice* s : {&slice, &in_memory}) {
    BatchLoader ordered(*s, 64);
    std::vector<int64_t> rows;
    for (ordered.reset_in_order(); ordered.has_next();) {
      const auto b = row_indices(ordered.next(), classes);
      rows.insert(rows.end(), b.begin(), b.end());
    }
    CHECK(rows == all);
  }
}

TEST_CASE("inputs the fuzzers found (test/fuzz/regressions) give errors, not crashes") {
  const char* source = std::getenv("PITRAIN_SOURCE");
  REQUIRE(source);
  int replayed = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(source) + "/test/fuzz/regressions")) {
    const std::string path = entry.path().string();
    std::ifstream file(path, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                                     std::istreambuf_iterator<char>());
    INFO(path);
    if (entry.path().filename().string().rfind("checkpoint-", 0) == 0) {
      CHECK_THROWS_AS(load_checkpoint(path), Error);
    } else {
      try {
        parse_npy_images(path, bytes);
      } catch (const Error&) {
      }
      try {
        parse_idx_images(path, bytes);
      } catch (const Error&) {
      }
    }
    ++replayed;
  }
  CHECK(replayed > 0);
}
